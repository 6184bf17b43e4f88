package apiserver

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// The OpenAPI documents (/openapi/v2, /openapi/v3 and below) are built by
// package openapi and cached per registry generation (documents.go); these
// handlers negotiate their form and answer ETags.

// Media types of the protobuf document: client-go asks for the first, kube
// answers with the second (and accepts both).
const (
	openAPIV2ProtobufSubtypeOld = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
	openAPIV2ProtobufSubtype    = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaOpenAPIV2Protobuf      = "application/" + openAPIV2ProtobufSubtype
)

func (s *Server) serveOpenAPIV3Index(w http.ResponseWriter, r *http.Request) {
	s.writeRaw(w, r, http.StatusOK, s.openAPIDocuments().V3Index)
}

func (s *Server) serveOpenAPIV3(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(chi.URLParam(r, "*"), "/")
	doc, tag, ok := s.openAPIDocuments().V3(path)
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	h := w.Header()
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if current := strings.Trim(tag, `"`); hash != current {
			// A hash from an older index: to the current document, as
			// kube-apiserver, rather than serve it as immutable under the
			// old one. The location is relative to the request's (its last
			// segment), so that it holds under any prefix kapi is mounted at.
			h.Set("Cache-Control", "no-cache, private")
			h.Set("Etag", tag)
			h.Set("Location", path[strings.LastIndexByte(path, '/')+1:]+"?hash="+current)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		h.Set("Cache-Control", "public, immutable")
	}
	h.Add("Vary", "Accept")
	if c, ok := codec.Choose(r.Header.Get("Accept"), func(c codec.Choice) bool { return c.As == "" && c.Format != codec.FormatProtobuf }); ok &&
		c.Format == codec.FormatJSON && !wantPretty(r, c) {
		// The document as stored: its ETag is its hash in the index.
		h.Set("Etag", tag)
		if ifNoneMatch(r, tag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}

// serveOpenAPIV2 serves the Swagger 2.0 document as JSON (the default),
// YAML, or the gnostic protobuf message, with kube-apiserver's ETag.
func (s *Server) serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	d := s.openAPIDocuments()
	h := w.Header()
	h.Add("Vary", "Accept")
	accept := r.Header.Get("Accept")
	if wantsOpenAPIV2Protobuf(accept) {
		pb, err := d.V2Protobuf()
		if err != nil {
			s.writeError(w, r, meta.NewInternalError(err))
			return
		}
		etag := d.V2ETag()
		h.Set("Etag", etag)
		if ifNoneMatch(r, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", mediaOpenAPIV2Protobuf)
		h.Set("X-Content-Type-Options", "nosniff")
		writeChunks(w, r, http.StatusOK, [][]byte{pb})
		return
	}
	if c, ok := codec.Choose(accept, func(c codec.Choice) bool { return c.As == "" && c.Format != codec.FormatProtobuf }); ok &&
		c.Format == codec.FormatJSON && !wantPretty(r, c) {
		etag := d.V2ETag()
		h.Set("Etag", etag)
		if ifNoneMatch(r, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	s.writeRaw(w, r, http.StatusOK, d.V2)
}

// wantsOpenAPIV2Protobuf reports whether the Accept header prefers the
// protobuf document to JSON and YAML. A wildcard means JSON, as with
// kube-apiserver.
func wantsOpenAPIV2Protobuf(accept string) bool {
	for _, a := range codec.ParseAccept(accept) {
		if a.Type == "application" && (a.Subtype == openAPIV2ProtobufSubtypeOld || a.Subtype == openAPIV2ProtobufSubtype) {
			return true
		}
		if _, ok := codec.Choose(a.String(), func(c codec.Choice) bool { return c.As == "" && c.Format != codec.FormatProtobuf }); ok {
			return false
		}
	}
	return false
}

// ifNoneMatch reports whether the request's If-None-Match names etag (or *).
func ifNoneMatch(r *http.Request, etag string) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == etag || t == "*" {
				return true
			}
		}
	}
	return false
}
