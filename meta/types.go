// Package meta is kapi's object model: the Kubernetes meta/v1 types that every
// object and response carries (TypeMeta, ObjectMeta, ListMeta, Status), group,
// version, kind and resource names, label and field selectors, name and label
// validation, and helpers that read and write metadata on generic decoded
// objects (map[string]any).
//
// The JSON encoding of every type here is wire-compatible with Kubernetes'
// k8s.io/apimachinery/pkg/apis/meta/v1, without importing it.
//
// # Generic objects and numbers
//
// Objects move through kapi as decoded JSON: map[string]any, []any, string,
// bool, nil and numbers. JSON is decoded with json.Decoder.UseNumber, so the
// canonical number is a json.Number, which keeps integers exact beyond 2^53;
// everything this package produces (setters, ToMap) uses that form. Values
// built in Go may hold other numeric types, so every helper here and in
// package schema accepts json.Number, all Go integer kinds, float32 and
// float64: read numbers with AsInt64 or AsFloat64 and compare values with
// DeepEqual, never with a type switch on float64 or reflect.DeepEqual.
package meta

import (
	"sync/atomic"
	"time"
)

// TypeMeta is the apiVersion and kind of an object.
type TypeMeta struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// ObjectMeta is the metadata every stored object has.
type ObjectMeta struct {
	Name                       string            `json:"name,omitempty"`
	GenerateName               string            `json:"generateName,omitempty"`
	Namespace                  string            `json:"namespace,omitempty"`
	UID                        string            `json:"uid,omitempty"`
	ResourceVersion            string            `json:"resourceVersion,omitempty"`
	Generation                 int64             `json:"generation,omitempty"`
	CreationTimestamp          *Time             `json:"creationTimestamp,omitempty"`
	DeletionTimestamp          *Time             `json:"deletionTimestamp,omitempty"`
	DeletionGracePeriodSeconds *int64            `json:"deletionGracePeriodSeconds,omitempty"`
	Labels                     map[string]string `json:"labels,omitempty"`
	Annotations                map[string]string `json:"annotations,omitempty"`
	OwnerReferences            []OwnerReference  `json:"ownerReferences,omitempty"`
	Finalizers                 []string          `json:"finalizers,omitempty"`
	ManagedFields              []ManagedFields   `json:"managedFields,omitempty"`
}

// OwnerReference points at an object that owns this one.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ManagedFields records which manager owns which fields (server-side apply).
type ManagedFields struct {
	Manager     string         `json:"manager,omitempty"`
	Operation   string         `json:"operation,omitempty"`
	APIVersion  string         `json:"apiVersion,omitempty"`
	Time        *Time          `json:"time,omitempty"`
	FieldsType  string         `json:"fieldsType,omitempty"`
	FieldsV1    map[string]any `json:"fieldsV1,omitempty"`
	Subresource string         `json:"subresource,omitempty"`
}

// ListMeta is the metadata of a collection.
type ListMeta struct {
	ResourceVersion    string `json:"resourceVersion,omitempty"`
	Continue           string `json:"continue,omitempty"`
	RemainingItemCount *int64 `json:"remainingItemCount,omitempty"`
}

// Time is a timestamp encoded as RFC 3339 in UTC with second precision, as
// Kubernetes encodes metav1.Time.
type Time struct{ time.Time }

// TimeFormat is the layout of Time on the wire.
const TimeFormat = time.RFC3339

// NewTime returns t truncated to seconds, in UTC.
func NewTime(t time.Time) *Time { return &Time{t.UTC().Truncate(time.Second)} }

// MarshalJSON encodes the time as an RFC 3339 string (null when zero).
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	b := make([]byte, 0, len(TimeFormat)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeFormat)
	return append(b, '"'), nil
}

// UnmarshalJSON decodes an RFC 3339 string or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return &time.ParseError{Layout: TimeFormat, Value: string(b), Message: ": not a JSON string"}
	}
	pt, err := time.Parse(TimeFormat, string(b[1:len(b)-1]))
	if err != nil {
		return err
	}
	t.Time = pt.UTC()
	return nil
}

// Status is the result of an operation that returns no object, and the body of
// every error response.
type Status struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata"`
	// Status is "Success" or "Failure".
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Reason  StatusReason   `json:"reason,omitempty"`
	Details *StatusDetails `json:"details,omitempty"`
	Code    int32          `json:"code,omitempty"`
}

// Status values.
const (
	StatusSuccess = "Success"
	StatusFailure = "Failure"
)

// StatusDetails names the object an error is about and its causes.
type StatusDetails struct {
	Name              string        `json:"name,omitempty"`
	Group             string        `json:"group,omitempty"`
	Kind              string        `json:"kind,omitempty"`
	UID               string        `json:"uid,omitempty"`
	Causes            []StatusCause `json:"causes,omitempty"`
	RetryAfterSeconds int32         `json:"retryAfterSeconds,omitempty"`
}

// StatusCause is one reason for an error, usually tied to a field.
type StatusCause struct {
	Type    CauseType `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Field   string    `json:"field,omitempty"`
}

// StatusReason is the machine-readable reason of a failure.
type StatusReason string

// Status reasons, as Kubernetes names them.
const (
	StatusReasonUnknown               StatusReason = ""
	StatusReasonUnauthorized          StatusReason = "Unauthorized"
	StatusReasonForbidden             StatusReason = "Forbidden"
	StatusReasonNotFound              StatusReason = "NotFound"
	StatusReasonAlreadyExists         StatusReason = "AlreadyExists"
	StatusReasonConflict              StatusReason = "Conflict"
	StatusReasonGone                  StatusReason = "Gone"
	StatusReasonInvalid               StatusReason = "Invalid"
	StatusReasonServerTimeout         StatusReason = "ServerTimeout"
	StatusReasonTimeout               StatusReason = "Timeout"
	StatusReasonTooManyRequests       StatusReason = "TooManyRequests"
	StatusReasonBadRequest            StatusReason = "BadRequest"
	StatusReasonMethodNotAllowed      StatusReason = "MethodNotAllowed"
	StatusReasonNotAcceptable         StatusReason = "NotAcceptable"
	StatusReasonRequestEntityTooLarge StatusReason = "RequestEntityTooLarge"
	StatusReasonUnsupportedMediaType  StatusReason = "UnsupportedMediaType"
	StatusReasonInternalError         StatusReason = "InternalError"
	StatusReasonExpired               StatusReason = "Expired"
	StatusReasonServiceUnavailable    StatusReason = "ServiceUnavailable"
	// StatusReasonInsufficientStorage goes with 507: the server could not
	// store the request's change (a full disk). Kubernetes has no reason of
	// its own for it.
	StatusReasonInsufficientStorage StatusReason = "InsufficientStorage"
)

// CauseType is the machine-readable kind of a StatusCause.
type CauseType string

// Cause types, as Kubernetes names them.
const (
	CauseTypeFieldValueNotFound       CauseType = "FieldValueNotFound"
	CauseTypeFieldValueRequired       CauseType = "FieldValueRequired"
	CauseTypeFieldValueDuplicate      CauseType = "FieldValueDuplicate"
	CauseTypeFieldValueInvalid        CauseType = "FieldValueInvalid"
	CauseTypeFieldValueNotSupported   CauseType = "FieldValueNotSupported"
	CauseTypeFieldValueForbidden      CauseType = "FieldValueForbidden"
	CauseTypeFieldValueTooLong        CauseType = "FieldValueTooLong"
	CauseTypeTooMany                  CauseType = "FieldValueTooMany"
	CauseTypeInternal                 CauseType = "InternalError"
	CauseTypeTypeInvalid              CauseType = "FieldValueTypeInvalid"
	CauseTypeUnexpectedServerResponse CauseType = "UnexpectedServerResponse"
	CauseTypeFieldManagerConflict     CauseType = "FieldManagerConflict"
	CauseTypeResourceVersionTooLarge  CauseType = "ResourceVersionTooLarge"
)

// GroupVersion names an API group version ("" group = the core group).
type GroupVersion struct {
	Group   string
	Version string
}

// String returns "group/version", or "version" for the core group.
func (gv GroupVersion) String() string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.Group + "/" + gv.Version
}

// GroupVersionKind names a kind in a group version.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// GroupVersion returns the group version of gvk.
func (gvk GroupVersionKind) GroupVersion() GroupVersion {
	return GroupVersion{Group: gvk.Group, Version: gvk.Version}
}

// GroupVersionResource names a resource in a group version.
type GroupVersionResource struct {
	Group    string
	Version  string
	Resource string
}

// GroupVersion returns the group version of gvr.
func (gvr GroupVersionResource) GroupVersion() GroupVersion {
	return GroupVersion{Group: gvr.Group, Version: gvr.Version}
}

// GroupResource names a resource in a group, across versions.
type GroupResource struct {
	Group    string
	Resource string
}

// String returns "resource.group", or "resource" for the core group.
func (gr GroupResource) String() string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// ParseGroupVersion splits "group/version" (or "version" for core).
func ParseGroupVersion(s string) (GroupVersion, bool) {
	if s == "" {
		return GroupVersion{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			g, v := s[:i], s[i+1:]
			if g == "" || v == "" {
				return GroupVersion{}, false
			}
			for j := 0; j < len(v); j++ {
				if v[j] == '/' {
					return GroupVersion{}, false
				}
			}
			return GroupVersion{Group: g, Version: v}, true
		}
	}
	return GroupVersion{Version: s}, true
}

// Stamps formats timestamps the way objects carry them (TimeFormat, UTC,
// whole seconds) and keeps the last one: writes in the same second share one
// string, already boxed for a generic object. The zero Stamps is ready; it
// is safe for concurrent use.
type Stamps struct {
	last atomic.Pointer[stamp]
}

type stamp struct {
	sec int64
	v   any // the formatted string
}

// Value returns t formatted as TimeFormat in UTC, to whole seconds, as a
// value for a generic object's field.
func (s *Stamps) Value(t time.Time) any {
	sec := t.Unix()
	if p := s.last.Load(); p != nil && p.sec == sec {
		return p.v
	}
	p := &stamp{sec: sec, v: time.Unix(sec, 0).UTC().Format(TimeFormat)}
	s.last.Store(p)
	return p.v
}
