package apiserver

import (
	"sync"

	"github.com/kapi-dev/kapi/apiserver/discovery"
	"github.com/kapi-dev/kapi/apiserver/openapi"
	"github.com/kapi-dev/kapi/apiserver/registry"
)

// docCache holds documents built from the registry's types (the discovery
// documents, the OpenAPI documents): built on first use, and again on the
// first use after a type is registered or unregistered, which bumps the
// registry's generation. Requests share the documents read-only.
type docCache[T any] struct {
	mu   sync.Mutex
	ok   bool
	gen  uint64
	docs T
}

// get returns the documents of reg's current generation, built with build.
func (c *docCache[T]) get(reg *registry.Registry, build func([]*registry.Resource) T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := reg.Generation()
	if !c.ok || c.gen != gen {
		c.docs, c.gen, c.ok = build(reg.Resources()), gen, true
	}
	return c.docs
}

// drop releases the documents (the registry changed).
func (c *docCache[T]) drop() {
	c.mu.Lock()
	var zero T
	c.docs, c.ok = zero, false
	c.mu.Unlock()
}

// discoveryDocuments returns the discovery documents of the served types.
func (s *Server) discoveryDocuments() *discovery.Documents {
	return s.discoveryDocs.get(s.reg, discovery.Build)
}

// openAPIDocuments returns the OpenAPI documents of the served types.
func (s *Server) openAPIDocuments() *openapi.Documents {
	return s.openAPIDocs.get(s.reg, openapi.Build)
}

// invalidateDocs drops the documents when a type is registered or
// unregistered (the registry's OnChange).
func (s *Server) invalidateDocs() {
	s.discoveryDocs.drop()
	s.openAPIDocs.drop()
}
