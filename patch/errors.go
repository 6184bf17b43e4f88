package patch

import (
	"fmt"
	"net/http"

	"github.com/kapi-dev/kapi/meta"
)

// Error is a patch that cannot be applied. Code is the HTTP status the API
// answers with:
//
//   - 400 (http.StatusBadRequest): the patch itself is malformed (not JSON or
//     YAML, not the expected shape, an unknown directive);
//   - 422 (http.StatusUnprocessableEntity): the patch is well-formed but does
//     not apply to this object (a failed JSON Patch test, a missing path, a
//     list element without its merge key, a value of the wrong type); Fields,
//     when set, names the fields at fault;
//   - 413 (http.StatusRequestEntityTooLarge): the patch exceeds a limit.
type Error struct {
	Code    int
	Message string
	Fields  meta.ErrorList
}

func (e *Error) Error() string { return e.Message }

func badRequest(format string, args ...any) *Error {
	return &Error{Code: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return &Error{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *Error {
	return &Error{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf(format, args...)}
}
