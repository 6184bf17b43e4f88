package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/codec"
)

// representation is what a response is encoded as.
type representation int

const (
	reprJSON representation = iota
	reprYAML
	reprTable
)

var (
	offerJSON        = codec.MediaType{Type: "application", Subtype: "json"}
	offerYAML        = codec.MediaType{Type: "application", Subtype: "yaml"}
	offerTableV1     = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "Table", "g": "meta.k8s.io", "v": "v1"}}
	offerTableV1beta = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "Table", "g": "meta.k8s.io", "v": "v1beta1"}}
)

// acceptedTypes is the list a 406 names.
var acceptedTypes = []string{"application/json", "application/yaml"}

// negotiateObject chooses the representation of an object or list response.
// tables says whether Table is on offer (reads of stored resources).
func negotiateObject(r *http.Request, tables bool) (representation, string, error) {
	offers := []codec.MediaType{offerJSON, offerYAML}
	if tables {
		offers = append(offers, offerTableV1, offerTableV1beta)
	}
	i, _ := codec.Negotiate(r.Header.Get("Accept"), offers)
	switch i {
	case 0:
		return reprJSON, "", nil
	case 1:
		return reprYAML, "", nil
	case 2:
		return reprTable, "v1", nil
	case 3:
		return reprTable, "v1beta1", nil
	}
	return reprJSON, "", meta.NewNotAcceptable(acceptedTypes)
}

// writeRaw writes a JSON body in the representation r asks for (JSON or YAML).
func (s *Server) writeRaw(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	repr, _, err := negotiateObject(r, false)
	if err != nil {
		// The error itself is written as JSON: nothing else was acceptable.
		repr = reprJSON
		se, _ := meta.AsStatusError(err)
		code = se.Code()
		body, _ = json.Marshal(se.Status)
	}
	if repr == reprYAML {
		y, yerr := yaml.JSONToYAML(body)
		if yerr == nil {
			w.Header().Set("Content-Type", codec.MediaYAML)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(code)
			_, _ = w.Write(y)
			return
		}
	}
	w.Header().Set("Content-Type", codec.MediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeObject encodes v as JSON (or YAML) and writes it.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, meta.NewInternalError(err))
		return
	}
	s.writeRaw(w, r, code, body)
}

// writeError writes err as a Status. Errors that are no StatusError are
// logged and answered with a 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	se, ok := meta.AsStatusError(err)
	if !ok {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			se = meta.NewRequestEntityTooLarge("the request body is too large")
		} else {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			se = meta.NewInternalError(err)
		}
	}
	for _, warning := range se.Warnings {
		addWarning(w, warning)
	}
	if se.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(se.RetryAfter))
	}
	body, _ := json.Marshal(se.Status)
	s.writeRaw(w, r, se.Code(), body)
}

// addWarning adds one Warning header in the format Kubernetes uses.
func addWarning(w http.ResponseWriter, text string) {
	w.Header().Add("Warning", `299 - `+strconv.Quote(text))
}
