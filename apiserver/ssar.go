package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/codec"
)

// selfSubjectAccessReview is authorization.k8s.io/v1 SelfSubjectAccessReview,
// the body of `kubectl auth can-i`.
type selfSubjectAccessReview struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		ResourceAttributes    *resourceAttributes    `json:"resourceAttributes,omitempty"`
		NonResourceAttributes *nonResourceAttributes `json:"nonResourceAttributes,omitempty"`
	} `json:"spec"`
	Status struct {
		Allowed         bool   `json:"allowed"`
		Denied          bool   `json:"denied,omitempty"`
		Reason          string `json:"reason,omitempty"`
		EvaluationError string `json:"evaluationError,omitempty"`
	} `json:"status"`
}

type resourceAttributes struct {
	Namespace   string `json:"namespace,omitempty"`
	Verb        string `json:"verb,omitempty"`
	Group       string `json:"group,omitempty"`
	Version     string `json:"version,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Name        string `json:"name,omitempty"`
}

type nonResourceAttributes struct {
	Path string `json:"path,omitempty"`
	Verb string `json:"verb,omitempty"`
}

// serveSelfSubjectAccessReview answers "may I?" for the requesting user from
// the server's own authorizer. It is create-only and stores nothing.
func (s *Server) serveSelfSubjectAccessReview(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	var review selfSubjectAccessReview
	protobufIn := isProtobuf(r.Header.Get("Content-Type"))
	if protobufIn {
		body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes))
		if err != nil {
			s.writeError(w, r, meta.NewRequestEntityTooLarge("the request body is too large"))
			return
		}
		if review, err = decodeSSARProtobuf(body); err != nil {
			s.writeError(w, r, meta.NewBadRequest("error decoding SelfSubjectAccessReview: "+err.Error()))
			return
		}
	} else {
		obj, _, err := s.readBody(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		b, _ := json.Marshal(obj)
		if err := json.Unmarshal(b, &review); err != nil {
			s.writeError(w, r, meta.NewBadRequest("error decoding SelfSubjectAccessReview: "+err.Error()))
			return
		}
	}
	var a auth.Attributes
	switch ra, nra := review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes; {
	case ra != nil && nra == nil:
		a = auth.Attributes{ResourceRequest: true, Verb: ra.Verb, APIGroup: ra.Group, APIVersion: ra.Version, Resource: ra.Resource,
			Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
	case nra != nil && ra == nil:
		a = auth.Attributes{Verb: nra.Verb, Path: nra.Path}
	default:
		s.writeError(w, r, meta.NewInvalid(meta.GroupVersionKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "",
			meta.ErrorList{meta.Invalid(meta.NewPath("spec"), "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")}))
		return
	}
	a.User, _ = auth.UserFrom(r.Context())
	d, reason, err := s.authorizer.Authorize(r.Context(), a)
	review.Kind, review.APIVersion = "SelfSubjectAccessReview", "authorization.k8s.io/v1"
	if review.Metadata == nil {
		review.Metadata = map[string]any{}
	}
	review.Status.Allowed = d == auth.Allow && err == nil
	review.Status.Denied = d == auth.Deny
	review.Status.Reason = reason
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	offers := []codec.MediaType{offerJSON, offerYAML, offerProtobuf}
	if i, _ := codec.Negotiate(r.Header.Get("Accept"), offers); i == 2 {
		w.Header().Set("Content-Type", codec.MediaProtobuf)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(encodeSSARProtobuf(review))
		return
	}
	s.writeObject(w, r, http.StatusCreated, review)
}

func isProtobuf(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == codec.MediaProtobuf
}

var offerProtobuf = codec.MediaType{Type: "application", Subtype: "vnd.kubernetes.protobuf"}

// decodeSSARProtobuf decodes authorization.k8s.io/v1 SelfSubjectAccessReview
// (spec = 2: resourceAttributes = 1, nonResourceAttributes = 2).
func decodeSSARProtobuf(body []byte) (selfSubjectAccessReview, error) {
	var review selfSubjectAccessReview
	u, err := codec.DecodeEnvelope(body)
	if err != nil {
		return review, err
	}
	if u.Kind != "SelfSubjectAccessReview" {
		return review, fmt.Errorf("the kind in the data (%s) is not SelfSubjectAccessReview", u.Kind)
	}
	str := func(dst *string) func(protowire.Number, protowire.Type, []byte) {
		return func(_ protowire.Number, _ protowire.Type, v []byte) { *dst = string(v) }
	}
	err = codec.Walk(u.Raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 2 || typ != protowire.BytesType {
			return nil
		}
		return codec.Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case 1:
				ra := &review.Spec.ResourceAttributes
				*ra = new(resourceAttributes)
				fields := map[protowire.Number]func(protowire.Number, protowire.Type, []byte){
					1: str(&(*ra).Namespace), 2: str(&(*ra).Verb), 3: str(&(*ra).Group), 4: str(&(*ra).Version),
					5: str(&(*ra).Resource), 6: str(&(*ra).Subresource), 7: str(&(*ra).Name),
				}
				return codec.Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
					if f := fields[num]; f != nil && typ == protowire.BytesType {
						f(num, typ, v)
					}
					return nil
				})
			case 2:
				nra := &review.Spec.NonResourceAttributes
				*nra = new(nonResourceAttributes)
				return codec.Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
					if typ == protowire.BytesType {
						switch num {
						case 1:
							(*nra).Path = string(v)
						case 2:
							(*nra).Verb = string(v)
						}
					}
					return nil
				})
			}
			return nil
		})
	})
	return review, err
}

// encodeSSARProtobuf encodes the review's status (3: allowed = 1, reason = 2,
// evaluationError = 3, denied = 4) with empty metadata and spec.
func encodeSSARProtobuf(review selfSubjectAccessReview) []byte {
	var st []byte
	st = protowire.AppendTag(st, 1, protowire.VarintType)
	st = protowire.AppendVarint(st, protowire.EncodeBool(review.Status.Allowed))
	st = protowire.AppendTag(st, 2, protowire.BytesType)
	st = protowire.AppendString(st, review.Status.Reason)
	st = protowire.AppendTag(st, 3, protowire.BytesType)
	st = protowire.AppendString(st, review.Status.EvaluationError)
	st = protowire.AppendTag(st, 4, protowire.VarintType)
	st = protowire.AppendVarint(st, protowire.EncodeBool(review.Status.Denied))
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendBytes(msg, nil)
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, nil)
	msg = protowire.AppendTag(msg, 3, protowire.BytesType)
	msg = protowire.AppendBytes(msg, st)
	return codec.EncodeEnvelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", msg)
}
