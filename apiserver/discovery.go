package apiserver

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/apiserver/discovery"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// The discovery documents (/api, /apis, /apis/GROUP and the group versions)
// are built by package discovery and cached per registry generation
// (documents.go); these handlers negotiate their form.

// Aggregated discovery media types.
var (
	offerAggregatedV2      = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "APIGroupDiscoveryList", "g": "apidiscovery.k8s.io", "v": "v2"}}
	offerAggregatedV2beta1 = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "APIGroupDiscoveryList", "g": "apidiscovery.k8s.io", "v": "v2beta1"}}
)

// serveDiscovery answers /api or /apis with aggregated discovery when the
// client asks for it (with its ETag, and 304 when the client has it, as
// kube-apiserver: client-go's cache revalidates with it), otherwise with the
// legacy document.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, aggregated discovery.Aggregated, legacy []byte) {
	i, _ := codec.Negotiate(r.Header.Get("Accept"), []codec.MediaType{offerAggregatedV2, offerAggregatedV2beta1, offerJSON, offerYAML})
	switch i {
	case 0, 1:
		body, tag := aggregated.V2, aggregated.V2ETag
		ct := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		if i == 1 {
			body, tag = aggregated.V2beta1, aggregated.V2beta1ETag
			ct = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
		}
		h := w.Header()
		h.Set("Vary", "Accept")
		h.Set("Cache-Control", "public")
		h.Set("Etag", tag)
		if ifNoneMatch(r, tag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	case 2, 3:
		w.Header().Set("Vary", "Accept")
		s.writeRaw(w, r, http.StatusOK, legacy)
	default:
		s.writeError(w, r, meta.NewNotAcceptable(acceptedTypes))
	}
}

func (s *Server) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	d := s.discoveryDocuments()
	s.serveDiscovery(w, r, d.AggregatedAPI, d.APIVersions)
}

func (s *Server) serveAPIGroups(w http.ResponseWriter, r *http.Request) {
	d := s.discoveryDocuments()
	s.serveDiscovery(w, r, d.AggregatedAPIs, d.GroupList)
}

func (s *Server) serveAPIGroup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	doc, ok := s.discoveryDocuments().Group(chi.URLParam(r, "group"))
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}

func (s *Server) serveGroupVersion(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	gv := meta.GroupVersion{Group: chi.URLParam(r, "group"), Version: chi.URLParam(r, "version")}
	doc, ok := s.discoveryDocuments().ResourceList(gv)
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}
