// Package openapi builds the OpenAPI documents of a set of resource types
// from their registered schemas, as kube-apiserver serves them and kubectl
// explain, kubectl's client-side validation and client-go read them: one
// OpenAPI v3 document per group version (/openapi/v3/apis/GROUP/VERSION,
// core at /openapi/v3/api/v1) with an index (/openapi/v3), and one Swagger
// 2.0 document of everything (/openapi/v2), as JSON or as the gnostic
// protobuf message (v2proto.go). Operations carry the x-kubernetes-action
// and x-kubernetes-group-version-kind extensions and the query parameters
// kubectl probes for (fieldValidation, dryRun).
//
// Build turns the registry's resources into the documents, once per set of
// types. Serving them (content negotiation, ETags and caching headers,
// authorization, caching per registry generation) is the apiserver
// package's.
package openapi

import (
	"encoding/json"
	"sync"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/internal/etag"
	"github.com/kapi-dev/kapi/meta"
)

// Documents are the OpenAPI documents of one set of resource types. They
// are shared by every request that serves them: read-only.
type Documents struct {
	// V2 is the Swagger 2.0 document of every type, as JSON.
	V2 []byte
	// V3Index is the OpenAPI v3 index: the path of each group version's
	// document with its hash.
	V3Index []byte

	v3     map[string][]byte // "api/v1", "apis/GROUP/VERSION" -> document
	v3ETag map[string]string // the same -> its ETag

	// The ETag and the protobuf form of V2, computed on first use.
	etagOnce  sync.Once
	etag      string
	protoOnce sync.Once
	proto     []byte
	protoErr  error
}

// V3 returns the OpenAPI v3 document of a group version by its path below
// /openapi/v3/ ("api/v1" for core, "apis/GROUP/VERSION" otherwise) and its
// ETag (its hash in V3Index, quoted).
func (d *Documents) V3(path string) (doc []byte, etag string, ok bool) {
	doc, ok = d.v3[path]
	return doc, d.v3ETag[path], ok
}

// V2ETag is kube-apiserver's ETag of the v2 document: the quoted,
// upper-case hex SHA-512 of its JSON. Its protobuf form has the same one.
func (d *Documents) V2ETag() string {
	d.etagOnce.Do(func() { d.etag = etag.Of(d.V2) })
	return d.etag
}

// V2Protobuf returns the v2 document as the gnostic openapi_v2.Document
// message.
func (d *Documents) V2Protobuf() ([]byte, error) {
	d.protoOnce.Do(func() { d.proto, d.protoErr = encodeV2Protobuf(d.V2) })
	return d.proto, d.protoErr
}

var info = map[string]any{"title": "Kubernetes", "version": "v1.36.0-kapi"}

// Build returns the OpenAPI documents of resources (the registry's
// Resources).
func Build(resources []*registry.Resource) *Documents {
	d := &Documents{v3: map[string][]byte{}, v3ETag: map[string]string{}}
	byGV := map[meta.GroupVersion][]*registry.Resource{}
	for _, r := range resources {
		byGV[r.GroupVersion()] = append(byGV[r.GroupVersion()], r)
	}
	index := map[string]any{}
	for gv, rs := range byGV {
		key := "apis/" + gv.Group + "/" + gv.Version
		if gv.Group == "" {
			key = "api/" + gv.Version
		}
		doc := buildV3(rs)
		hash := etag.Hash(doc)
		d.v3[key], d.v3ETag[key] = doc, `"`+hash+`"`
		index[key] = map[string]any{"serverRelativeURL": "/openapi/v3/" + key + "?hash=" + hash}
	}
	d.V3Index, _ = json.Marshal(map[string]any{"paths": index})
	d.V2 = buildV2(resources)
	return d
}

// buildV3 returns the OpenAPI v3 document of one group version's
// resources.
func buildV3(resources []*registry.Resource) []byte {
	b := opBuilder{v3: true}
	paths, schemas := b.pathsAndDefinitions(resources)
	doc, _ := json.Marshal(map[string]any{
		"openapi": "3.0.0", "info": info, "paths": paths,
		"components": map[string]any{"schemas": schemas},
	})
	return doc
}

// buildV2 returns the Swagger 2.0 document of every resource.
func buildV2(resources []*registry.Resource) []byte {
	paths, defs := opBuilder{}.pathsAndDefinitions(resources)
	doc, _ := json.Marshal(map[string]any{"swagger": "2.0", "info": info, "paths": paths, "definitions": defs})
	return doc
}

// pathsAndDefinitions returns the path items and the schemas of resources,
// with the shared meta/v1 schemas.
func (b opBuilder) pathsAndDefinitions(resources []*registry.Resource) (paths, defs map[string]any) {
	paths = map[string]any{}
	defs = metaDefinitions(b.ref)
	for _, r := range resources {
		for p, item := range b.paths(r) {
			paths[p] = item
		}
		sm := schemaMap(r, b.ref, b.v3)
		hoistDefinitions(sm, defs, b.ref, b.v3)
		StripDefinitionNames(sm)
		defs[definitionName(r.Group, r.Version, r.Kind)] = sm
		if r.Virtual == nil || r.Virtual.List != nil {
			defs[definitionName(r.Group, r.Version, r.ListKind)] = listSchema(r, b.ref)
		}
		for n, def := range subresourceDefinitions(r, b.v3, b.ref) {
			hoistDefinitions(def.(map[string]any), defs, b.ref, b.v3)
			StripDefinitionNames(def)
			defs[n] = def
		}
	}
	return paths, defs
}
