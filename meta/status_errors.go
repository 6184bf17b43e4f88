package meta

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// StatusError is an error that carries the Status an API response should
// answer with. Every layer of the server returns these for client-visible
// failures; anything else becomes a 500.
type StatusError struct {
	Status Status
	// Warnings are sent as Warning headers with the error response.
	Warnings []string
	// RetryAfter, when positive, is sent as a Retry-After header (seconds).
	RetryAfter int
}

func (e *StatusError) Error() string { return e.Status.Message }

// Code returns the HTTP status code.
func (e *StatusError) Code() int { return int(e.Status.Code) }

// AsStatusError returns the StatusError in err's chain, if any.
func AsStatusError(err error) (*StatusError, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se, true
	}
	return nil, false
}

// ReasonOf returns the Status reason of err, or "" when err is no StatusError.
func ReasonOf(err error) StatusReason {
	if se, ok := AsStatusError(err); ok {
		return se.Status.Reason
	}
	return StatusReasonUnknown
}

func newStatusError(code int, reason StatusReason, msg string, details *StatusDetails) *StatusError {
	return &StatusError{Status: Status{
		TypeMeta: TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   StatusFailure,
		Message:  msg,
		Reason:   reason,
		Details:  details,
		Code:     int32(code),
	}}
}

// NewNotFound is the 404 for a named object of a resource.
func NewNotFound(gr GroupResource, name string) *StatusError {
	return newStatusError(http.StatusNotFound, StatusReasonNotFound,
		fmt.Sprintf("%s %q not found", gr.String(), name),
		&StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource})
}

// NewAlreadyExists is the 409 for a create of an existing name.
func NewAlreadyExists(gr GroupResource, name string) *StatusError {
	return newStatusError(http.StatusConflict, StatusReasonAlreadyExists,
		fmt.Sprintf("%s %q already exists", gr.String(), name),
		&StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource})
}

// NewConflict is the 409 for a write against a stale resourceVersion or a
// failed precondition.
func NewConflict(gr GroupResource, name string, reason string) *StatusError {
	return newStatusError(http.StatusConflict, StatusReasonConflict,
		fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", gr.String(), name, reason),
		&StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource})
}

// ConflictModified is the reason text kube-apiserver gives for a stale write.
const ConflictModified = "the object has been modified; please apply your changes to the latest version and try again"

// NewInvalid is the 422 for an object that failed validation.
func NewInvalid(gk GroupVersionKind, name string, errs ErrorList) *StatusError {
	causes := make([]StatusCause, 0, len(errs))
	msgs := make([]string, 0, len(errs))
	for _, fe := range errs {
		causes = append(causes, StatusCause{Type: fe.Type, Message: strings.TrimPrefix(fe.Error(), fe.Field+": "), Field: fe.Field})
		msgs = append(msgs, fe.Error())
	}
	kind := gk.Kind
	qualified := kind
	if gk.Group != "" {
		qualified = kind + "." + gk.Group
	}
	var msg string
	switch len(msgs) {
	case 0:
		msg = fmt.Sprintf("%s %q is invalid", qualified, name)
	case 1:
		msg = fmt.Sprintf("%s %q is invalid: %s", qualified, name, msgs[0])
	default:
		msg = fmt.Sprintf("%s %q is invalid: [%s]", qualified, name, strings.Join(msgs, ", "))
	}
	return newStatusError(http.StatusUnprocessableEntity, StatusReasonInvalid, msg,
		&StatusDetails{Name: name, Group: gk.Group, Kind: kind, Causes: causes})
}

// NewBadRequest is a 400 with a message.
func NewBadRequest(msg string) *StatusError {
	return newStatusError(http.StatusBadRequest, StatusReasonBadRequest, msg, nil)
}

// NewMethodNotAllowed is the 405 for a verb a resource does not serve.
func NewMethodNotAllowed(method, what string) *StatusError {
	return newStatusError(http.StatusMethodNotAllowed, StatusReasonMethodNotAllowed,
		fmt.Sprintf("the server does not allow this method on the requested resource%s", what), nil)
}

// NewNotFoundPath is the 404 for a path that names no resource.
func NewNotFoundPath() *StatusError {
	return newStatusError(http.StatusNotFound, StatusReasonNotFound,
		"the server could not find the requested resource", &StatusDetails{})
}

// NewUnsupportedMediaType is the 415 for a body in a content type the
// endpoint does not accept.
func NewUnsupportedMediaType(contentType string) *StatusError {
	return newStatusError(http.StatusUnsupportedMediaType, StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; got %q", contentType), nil)
}

// NewNotAcceptable is the 406 for an Accept header nothing can satisfy.
func NewNotAcceptable(accepted []string) *StatusError {
	return newStatusError(http.StatusNotAcceptable, StatusReasonNotAcceptable,
		"only the following media types are accepted: "+strings.Join(accepted, ", "), nil)
}

// NewRequestEntityTooLarge is the 413 for an oversize body.
func NewRequestEntityTooLarge(msg string) *StatusError {
	return newStatusError(http.StatusRequestEntityTooLarge, StatusReasonRequestEntityTooLarge, msg, nil)
}

// NewGone is a 410 Expired (too old resourceVersion, expired continue token).
func NewGone(msg string) *StatusError {
	return newStatusError(http.StatusGone, StatusReasonExpired, msg, nil)
}

// NewTimeout is the 504 for a resourceVersion that did not become available.
func NewTimeout(msg string, retryAfter int) *StatusError {
	se := newStatusError(http.StatusGatewayTimeout, StatusReasonTimeout, msg,
		&StatusDetails{RetryAfterSeconds: int32(retryAfter), Causes: []StatusCause{{Type: CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}})
	se.RetryAfter = retryAfter
	return se
}

// NewForbidden is a 403 for an action refused on a named object.
func NewForbidden(gr GroupResource, name string, reason string) *StatusError {
	msg := fmt.Sprintf("%s %q is forbidden: %s", gr.String(), name, reason)
	if name == "" {
		msg = fmt.Sprintf("%s is forbidden: %s", gr.String(), reason)
	}
	return newStatusError(http.StatusForbidden, StatusReasonForbidden, msg,
		&StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource})
}

// NewInternalError is a 500 that hides nothing the client may not see.
func NewInternalError(err error) *StatusError {
	return newStatusError(http.StatusInternalServerError, StatusReasonInternalError,
		fmt.Sprintf("Internal error occurred: %v", err),
		&StatusDetails{Causes: []StatusCause{{Type: CauseTypeUnexpectedServerResponse, Message: err.Error()}}})
}

// NewInvalidOptions is the 422 kube-apiserver answers for an invalid
// combination of query options (details.kind ListOptions, PatchOptions, ...).
func NewInvalidOptions(kind string, errs ErrorList) *StatusError {
	se := NewInvalid(GroupVersionKind{Group: "meta.k8s.io", Kind: kind}, "", errs)
	return se
}

// NewInsufficientStorage is a 507: the server cannot store the change (its
// disk is full). Nothing was written; the same request succeeds once space
// is freed.
func NewInsufficientStorage(msg string) *StatusError {
	return newStatusError(http.StatusInsufficientStorage, StatusReasonInsufficientStorage, msg, nil)
}

// NewTooManyRequests is a 429 asking the client to retry after retryAfter
// seconds.
func NewTooManyRequests(msg string, retryAfter int) *StatusError {
	se := newStatusError(http.StatusTooManyRequests, StatusReasonTooManyRequests, msg,
		&StatusDetails{RetryAfterSeconds: int32(retryAfter)})
	se.RetryAfter = retryAfter
	return se
}

// NewServiceUnavailable is a 503.
func NewServiceUnavailable(msg string) *StatusError {
	return newStatusError(http.StatusServiceUnavailable, StatusReasonServiceUnavailable, msg, nil)
}
