package apiserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
)

// OpenAPI documents are generated from the registered schemas: one OpenAPI
// v3 document per group version (/openapi/v3/apis/GROUP/VERSION, core at
// /openapi/v3/api/v1) with an index at /openapi/v3, and one Swagger 2.0
// document of everything at /openapi/v2, as JSON or as the gnostic
// protobuf message kubectl reads (openapi_proto.go). Operations carry the
// x-kubernetes-action and x-kubernetes-group-version-kind extensions and the
// query parameters kubectl probes for (fieldValidation, dryRun).

const (
	metaPkg        = "io.k8s.apimachinery.pkg.apis.meta.v1."
	objectMetaName = metaPkg + "ObjectMeta"
	listMetaName   = metaPkg + "ListMeta"
	statusName     = metaPkg + "Status"
	patchName      = metaPkg + "Patch"
	deleteOptsName = metaPkg + "DeleteOptions"
)

// definitionName is the OpenAPI name of a kind: io.k8s.api.core.v1.ConfigMap
// for the core group, the reversed group otherwise (dev.example.v1.Widget).
func definitionName(group, version, kind string) string {
	if group == "" {
		return "io.k8s.api.core." + version + "." + kind
	}
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// schemaMap renders a resource's schema as a generic map with metadata
// pointing at ObjectMeta, and the GVK extension.
func schemaMap(r *registry.Resource, ref func(string) string, v3 bool) map[string]any {
	b, _ := json.Marshal(r.Schema)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{}
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	metaRef := map[string]any{"$ref": ref(objectMetaName)}
	if v3 {
		props["metadata"] = map[string]any{"allOf": []any{metaRef}, "default": map[string]any{},
			"description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}
	} else {
		props["metadata"] = metaRef
	}
	if _, ok := props["apiVersion"]; !ok {
		props["apiVersion"] = map[string]any{"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}
	}
	if _, ok := props["kind"]; !ok {
		props["kind"] = map[string]any{"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}
	}
	m["type"] = "object"
	m["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": r.Group, "version": r.Version, "kind": r.Kind}}
	return m
}

func listSchema(r *registry.Resource, ref func(string) string) map[string]any {
	return map[string]any{
		"type":        "object",
		"description": r.ListKind + " is a list of " + r.Kind,
		"required":    []any{"items"},
		"properties": map[string]any{
			"apiVersion": map[string]any{"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
			"kind":       map[string]any{"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
			"items":      map[string]any{"type": "array", "description": "List of " + r.Resource, "items": map[string]any{"$ref": ref(definitionName(r.Group, r.Version, r.Kind))}},
			"metadata":   map[string]any{"$ref": ref(listMetaName), "description": "Standard list metadata."},
		},
		"x-kubernetes-group-version-kind": []any{map[string]any{"group": r.Group, "version": r.Version, "kind": r.ListKind}},
	}
}

// metaDefinitions are the shared meta/v1 schemas.
func metaDefinitions(ref func(string) string) map[string]any {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	strMap := func(d string) map[string]any {
		return map[string]any{"type": "object", "description": d, "additionalProperties": map[string]any{"type": "string"}}
	}
	return map[string]any{
		objectMetaName: map[string]any{
			"type":        "object",
			"description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
			"properties": map[string]any{
				"name":                       str("Name must be unique within a namespace. Cannot be updated."),
				"generateName":               str("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
				"namespace":                  str("Namespace defines the space within which each name must be unique."),
				"uid":                        str("UID is the unique in time and space value for this object. Populated by the system. Read-only."),
				"resourceVersion":            str("An opaque value that represents the internal version of this object. Populated by the system. Read-only."),
				"generation":                 map[string]any{"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only."},
				"creationTimestamp":          map[string]any{"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
				"deletionTimestamp":          map[string]any{"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
				"deletionGracePeriodSeconds": map[string]any{"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system."},
				"labels":                     strMap("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
				"annotations":                strMap("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
				"finalizers": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "x-kubernetes-list-type": "set",
					"description": "Must be empty before the object is deleted from the registry."},
				"ownerReferences": map[string]any{"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"uid"},
					"x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge",
					"description": "List of objects depended by this object.",
					"items": map[string]any{"type": "object", "required": []any{"apiVersion", "kind", "name", "uid"}, "properties": map[string]any{
						"apiVersion": str("API version of the referent."), "kind": str("Kind of the referent."), "name": str("Name of the referent."), "uid": str("UID of the referent."),
						"controller":         map[string]any{"type": "boolean", "description": "If true, this reference points to the managing controller."},
						"blockOwnerDeletion": map[string]any{"type": "boolean", "description": "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed."},
					}}},
				"managedFields": map[string]any{"type": "array", "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.",
					"items": map[string]any{"type": "object", "properties": map[string]any{
						"manager": str("Manager is an identifier of the workflow managing these fields."), "operation": str("Operation is the type of operation which lead to this ManagedFieldsEntry being created."),
						"apiVersion":  str("APIVersion defines the version of this resource that this field set applies to."),
						"time":        map[string]any{"type": "string", "format": "date-time", "description": "Time is the timestamp of when the ManagedFields entry was added."},
						"fieldsType":  str("FieldsType is the discriminator for the different fields format and version."),
						"fieldsV1":    map[string]any{"type": "object", "description": "FieldsV1 holds the first JSON version format as described in the \"FieldsV1\" type."},
						"subresource": str("Subresource is the name of the subresource used to update that object."),
					}}},
			},
		},
		listMetaName: map[string]any{
			"type":        "object",
			"description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
			"properties": map[string]any{
				"resourceVersion":    str("String that identifies the server's internal version of this object."),
				"continue":           str("continue may be set if the user set a limit on the number of items returned."),
				"remainingItemCount": map[string]any{"type": "integer", "format": "int64", "description": "remainingItemCount is the number of subsequent items in the list which are not included in this list response."},
			},
		},
		statusName: map[string]any{
			"type":        "object",
			"description": "Status is a return value for calls that don't return other objects.",
			"properties": map[string]any{
				"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
				"kind":       str("Kind is a string value representing the REST resource this object represents."),
				"metadata":   map[string]any{"$ref": ref(listMetaName)},
				"status":     str("Status of the operation. One of: \"Success\" or \"Failure\"."),
				"message":    str("A human-readable description of the status of this operation."),
				"reason":     str("A machine-readable description of why this operation is in the \"Failure\" status."),
				"details":    map[string]any{"type": "object", "description": "Extended data associated with the reason.", "x-kubernetes-preserve-unknown-fields": true},
				"code":       map[string]any{"type": "integer", "format": "int32", "description": "Suggested HTTP return code for this status, 0 if not set."},
			},
			"x-kubernetes-group-version-kind": []any{map[string]any{"group": "", "version": "v1", "kind": "Status"}},
		},
		patchName: map[string]any{"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."},
		deleteOptsName: map[string]any{
			"type":        "object",
			"description": "DeleteOptions may be provided when deleting an API object.",
			"properties": map[string]any{
				"apiVersion":         str("APIVersion defines the versioned schema of this representation of an object."),
				"kind":               str("Kind is a string value representing the REST resource this object represents."),
				"dryRun":             map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "When present, indicates that modifications should not be persisted."},
				"gracePeriodSeconds": map[string]any{"type": "integer", "format": "int64", "description": "The duration in seconds before the object should be deleted."},
				"propagationPolicy":  str("Whether and how garbage collection will be performed."),
				"preconditions": map[string]any{"type": "object", "description": "Must be fulfilled before a deletion is carried out.", "properties": map[string]any{
					"uid": str("Specifies the target UID."), "resourceVersion": str("Specifies the target ResourceVersion")}},
			},
		},
	}
}

// queryParam describes one query parameter of an operation.
type queryParam struct {
	name, typ, desc string
}

var (
	writeParams = []queryParam{
		{"dryRun", "string", "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed"},
		{"fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes."},
		{"fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn (default) - Strict"},
	}
	patchParams = append(append([]queryParam{}, writeParams...), queryParam{"force", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people."})
	listParams  = []queryParam{
		{"allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."},
		{"continue", "string", "The continue option should be set when retrieving more results from the server."},
		{"fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."},
		{"labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
		{"limit", "integer", "limit is a maximum number of responses to return for a list call."},
		{"resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."},
		{"resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."},
		{"sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."},
		{"timeoutSeconds", "integer", "Timeout for the list/watch call."},
		{"watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."},
	}
	deleteParams = []queryParam{
		{"dryRun", "string", "When present, indicates that modifications should not be persisted."},
		{"gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."},
		{"propagationPolicy", "string", "Whether and how garbage collection will be performed."},
	}
	prettyParam = queryParam{"pretty", "string", "If 'true', then the output is pretty printed."}
)

// opBuilder renders operations in OpenAPI v3 or Swagger 2.0 form.
type opBuilder struct {
	v3 bool
}

func (b opBuilder) ref(name string) string {
	if b.v3 {
		return "#/components/schemas/" + name
	}
	return "#/definitions/" + name
}

func (b opBuilder) param(p queryParam, in string) map[string]any {
	m := map[string]any{"name": p.name, "in": in, "description": p.desc, "uniqueItems": true}
	if in == "path" {
		m["required"] = true
	}
	if b.v3 {
		m["schema"] = map[string]any{"type": p.typ, "uniqueItems": true}
		delete(m, "uniqueItems")
	} else {
		m["type"] = p.typ
	}
	return m
}

func (b opBuilder) params(ps []queryParam) []any {
	out := make([]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, b.param(p, "query"))
	}
	return out
}

func (b opBuilder) response(desc, schemaRef string) map[string]any {
	if schemaRef == "" {
		return map[string]any{"description": desc}
	}
	if b.v3 {
		content := map[string]any{}
		for _, ct := range []string{"application/json", "application/yaml"} {
			content[ct] = map[string]any{"schema": map[string]any{"$ref": b.ref(schemaRef)}}
		}
		return map[string]any{"description": desc, "content": content}
	}
	return map[string]any{"description": desc, "schema": map[string]any{"$ref": b.ref(schemaRef)}}
}

// op builds one operation. body is the definition name of the request body
// ("" for none); contentTypes are the accepted body types.
func (b opBuilder) op(id, desc, action string, kind gvk, params []queryParam, body string, contentTypes []string, responses map[string]any) map[string]any {
	op := map[string]any{
		"operationId":                     id,
		"description":                     desc,
		"tags":                            []any{tagOf(kind)},
		"parameters":                      b.params(params),
		"responses":                       responses,
		"x-kubernetes-action":             action,
		"x-kubernetes-group-version-kind": map[string]any{"group": kind.Group, "version": kind.Version, "kind": kind.Kind},
	}
	if body != "" {
		if b.v3 {
			content := map[string]any{}
			for _, ct := range contentTypes {
				content[ct] = map[string]any{"schema": map[string]any{"$ref": b.ref(body)}}
			}
			op["requestBody"] = map[string]any{"content": content, "required": true}
		} else {
			p := map[string]any{"name": "body", "in": "body", "required": true, "schema": map[string]any{"$ref": b.ref(body)}}
			op["parameters"] = append([]any{p}, op["parameters"].([]any)...)
			op["consumes"] = contentTypes
		}
	}
	if !b.v3 {
		op["produces"] = []any{"application/json", "application/yaml"}
		op["schemes"] = []any{"https"}
	}
	return op
}

func tagOf(k gvk) string {
	g := k.Group
	if g == "" {
		g = "core"
	}
	return strings.ReplaceAll(g, ".", "") + "_" + k.Version
}

// opName renders the operationId part of a kind (ExampleDevV1NamespacedWidget).
func opName(r *registry.Resource, namespaced bool) string {
	var b strings.Builder
	if r.Group == "" {
		b.WriteString("Core")
	} else {
		for _, p := range strings.FieldsFunc(r.Group, func(c rune) bool { return c == '.' || c == '-' }) {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	b.WriteString(strings.ToUpper(r.Version[:1]) + r.Version[1:])
	if namespaced {
		b.WriteString("Namespaced")
	}
	b.WriteString(r.Kind)
	return b.String()
}

// paths builds the path items of one resource.
func (b opBuilder) paths(r *registry.Resource) map[string]any {
	if r.Virtual != nil {
		return b.virtualPaths(r)
	}
	kind := gvk{Group: r.Group, Version: r.Version, Kind: r.Kind}
	def := definitionName(r.Group, r.Version, r.Kind)
	listDef := definitionName(r.Group, r.Version, r.ListKind)
	base := "/apis/" + r.Group + "/" + r.Version
	if r.Group == "" {
		base = "/api/" + r.Version
	}
	nsParam := queryParam{"namespace", "string", "object name and auth scope, such as for teams and projects"}
	nameParam := queryParam{"name", "string", "name of the " + r.Kind}
	scopeParams := func(named bool) []any {
		var ps []any
		if named {
			ps = append(ps, b.param(nameParam, "path"))
		}
		if r.Namespaced {
			ps = append(ps, b.param(nsParam, "path"))
		}
		return append(ps, b.param(prettyParam, "query"))
	}
	coll := base + "/" + r.Resource
	if r.Namespaced {
		coll = base + "/namespaces/{namespace}/" + r.Resource
	}
	item := coll + "/{name}"
	name := opName(r, r.Namespaced)
	writeTypes := []string{"application/json", "application/yaml"}
	patchTypes := []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
	if r.Group == "" || patch.DeclaresStrategicMerge(r.Schema) {
		patchTypes = append(patchTypes, "application/strategic-merge-patch+json")
	}
	ok := func(ref string) map[string]any { return b.response("OK", ref) }
	unauthorized := b.response("Unauthorized", "")
	out := map[string]any{
		coll: map[string]any{
			"get": b.op("list"+name, "list or watch objects of kind "+r.Kind, "list", kind, listParams, "", nil,
				map[string]any{"200": ok(listDef), "401": unauthorized}),
			"post": b.op("create"+name, "create a "+r.Kind, "post", kind, writeParams, def, writeTypes,
				map[string]any{"200": ok(def), "201": b.response("Created", def), "202": b.response("Accepted", def), "401": unauthorized}),
			"delete": b.op("deletecollection"+name, "delete collection of "+r.Kind, "deletecollection", kind,
				append(append([]queryParam{}, listParams...), deleteParams...), deleteOptsName, writeTypes,
				map[string]any{"200": ok(statusName), "401": unauthorized}),
			"parameters": scopeParams(false),
		},
		item: map[string]any{
			"get": b.op("read"+name, "read the specified "+r.Kind, "get", kind, nil, "", nil,
				map[string]any{"200": ok(def), "401": unauthorized}),
			"put": b.op("replace"+name, "replace the specified "+r.Kind, "put", kind, writeParams, def, writeTypes,
				map[string]any{"200": ok(def), "201": b.response("Created", def), "401": unauthorized}),
			"patch": b.op("patch"+name, "partially update the specified "+r.Kind, "patch", kind, patchParams, patchName, patchTypes,
				map[string]any{"200": ok(def), "201": b.response("Created", def), "401": unauthorized}),
			"delete": b.op("delete"+name, "delete a "+r.Kind, "delete", kind, deleteParams, deleteOptsName, writeTypes,
				map[string]any{"200": ok(statusName), "202": b.response("Accepted", statusName), "401": unauthorized}),
			"parameters": scopeParams(true),
		},
	}
	if r.Resource == "namespaces" {
		delete(out[coll].(map[string]any), "delete")
	}
	if r.Namespaced {
		out[base+"/"+r.Resource] = map[string]any{
			"get": b.op("list"+opName(r, false)+"ForAllNamespaces", "list or watch objects of kind "+r.Kind, "list", kind, listParams, "", nil,
				map[string]any{"200": ok(listDef), "401": unauthorized}),
			"parameters": []any{b.param(prettyParam, "query")},
		}
	}
	for _, sub := range r.Subresources.CustomNames() {
		out[item+"/"+sub] = b.customSubresourcePath(r, sub, name, scopeParams(true))
	}
	if r.Subresources.Status {
		out[item+"/status"] = map[string]any{
			"get": b.op("read"+name+"Status", "read status of the specified "+r.Kind, "get", kind, nil, "", nil,
				map[string]any{"200": ok(def), "401": unauthorized}),
			"put": b.op("replace"+name+"Status", "replace status of the specified "+r.Kind, "put", kind, writeParams, def, writeTypes,
				map[string]any{"200": ok(def), "201": b.response("Created", def), "401": unauthorized}),
			"patch": b.op("patch"+name+"Status", "partially update status of the specified "+r.Kind, "patch", kind, patchParams, patchName, patchTypes,
				map[string]any{"200": ok(def), "201": b.response("Created", def), "401": unauthorized}),
			"parameters": scopeParams(true),
		}
	}
	return out
}

// buildOpenAPI fills the OpenAPI documents.
func (d *documents) buildOpenAPI(resources []*registry.Resource, byGV map[string][]*registry.Resource) {
	info := map[string]any{"title": "Kubernetes", "version": "v1.36.0-kapi"}
	d.openAPIV3 = map[string][]byte{}
	index := map[string]any{}
	v3 := opBuilder{v3: true}
	for _, g := range d.groups {
		for _, v := range g.versions {
			gv := meta.GroupVersion{Group: g.name, Version: v}
			paths := map[string]any{}
			schemas := metaDefinitions(v3.ref)
			for _, r := range byGV[gv.String()] {
				for p, item := range v3.paths(r) {
					paths[p] = item
				}
				schemas[definitionName(r.Group, r.Version, r.Kind)] = schemaMap(r, v3.ref, true)
				if r.Virtual == nil || r.Virtual.List != nil {
					schemas[definitionName(r.Group, r.Version, r.ListKind)] = listSchema(r, v3.ref)
				}
				for n, def := range subresourceDefinitions(r, true, v3.ref) {
					schemas[n] = def
				}
			}
			doc, _ := json.Marshal(map[string]any{
				"openapi": "3.0.0", "info": info, "paths": paths,
				"components": map[string]any{"schemas": schemas},
			})
			key := "apis/" + g.name + "/" + v
			if g.name == "" {
				key = "api/" + v
			}
			d.openAPIV3[key] = doc
			sum := sha512.Sum512(doc)
			index[key] = map[string]any{"serverRelativeURL": "/openapi/v3/" + key + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))}
		}
	}
	d.openAPIV3Index, _ = json.Marshal(map[string]any{"paths": index})

	v2 := opBuilder{}
	paths := map[string]any{}
	defs := metaDefinitions(v2.ref)
	for _, r := range resources {
		for p, item := range v2.paths(r) {
			paths[p] = item
		}
		defs[definitionName(r.Group, r.Version, r.Kind)] = schemaMap(r, v2.ref, false)
		if r.Virtual == nil || r.Virtual.List != nil {
			defs[definitionName(r.Group, r.Version, r.ListKind)] = listSchema(r, v2.ref)
		}
		for n, def := range subresourceDefinitions(r, false, v2.ref) {
			defs[n] = def
		}
	}
	d.openAPIV2, _ = json.Marshal(map[string]any{"swagger": "2.0", "info": info, "paths": paths, "definitions": defs})
}

func (s *Server) serveOpenAPIV3Index(w http.ResponseWriter, r *http.Request) {
	s.writeRaw(w, r, http.StatusOK, s.documents().openAPIV3Index)
}

func (s *Server) serveOpenAPIV3(w http.ResponseWriter, r *http.Request) {
	doc, ok := s.documents().openAPIV3[strings.TrimSuffix(chi.URLParam(r, "*"), "/")]
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	if r.URL.Query().Get("hash") != "" {
		w.Header().Set("Cache-Control", "public, immutable")
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}

// basePath is the path of a resource's group version.
func basePath(r *registry.Resource) string {
	if r.Group == "" {
		return "/api/" + r.Version
	}
	return "/apis/" + r.Group + "/" + r.Version
}

// virtualPaths builds the path items of a virtual type: only the verbs it
// serves.
func (b opBuilder) virtualPaths(r *registry.Resource) map[string]any {
	v := r.Virtual
	kind := gvk{Group: r.Group, Version: r.Version, Kind: r.Kind}
	def := definitionName(r.Group, r.Version, r.Kind)
	coll := basePath(r) + "/" + r.Resource
	if r.Namespaced {
		coll = basePath(r) + "/namespaces/{namespace}/" + r.Resource
	}
	var scope []any
	if r.Namespaced {
		scope = append(scope, b.param(queryParam{"namespace", "string", "object name and auth scope, such as for teams and projects"}, "path"))
	}
	scope = append(scope, b.param(prettyParam, "query"))
	name := opName(r, r.Namespaced)
	unauthorized := b.response("Unauthorized", "")
	out := map[string]any{}
	collItem := map[string]any{"parameters": scope}
	if v.Create != nil {
		collItem["post"] = b.op("create"+name, "create a "+r.Kind, "post", kind, writeParams, def, []string{"application/json", "application/yaml"},
			map[string]any{"200": b.response("OK", def), "201": b.response("Created", def), "202": b.response("Accepted", def), "401": unauthorized})
	}
	if v.List != nil {
		collItem["get"] = b.op("list"+name, "list objects of kind "+r.Kind, "list", kind, nil, "", nil,
			map[string]any{"200": b.response("OK", definitionName(r.Group, r.Version, r.ListKind)), "401": unauthorized})
	}
	if len(collItem) > 1 {
		out[coll] = collItem
	}
	if v.Get != nil {
		params := append([]any{b.param(queryParam{"name", "string", "name of the " + r.Kind}, "path")}, scope...)
		out[coll+"/{name}"] = map[string]any{
			"get": b.op("read"+name, "read the specified "+r.Kind, "get", kind, nil, "", nil,
				map[string]any{"200": b.response("OK", def), "401": unauthorized}),
			"parameters": params,
		}
	}
	return out
}

// customSubresourcePath builds the path item of a custom subresource.
func (b opBuilder) customSubresourcePath(r *registry.Resource, sub, name string, params []any) map[string]any {
	sr := r.Subresources.Custom[sub]
	kind := gvk{Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind}
	title := strings.ToUpper(sub[:1]) + sub[1:]
	unauthorized := b.response("Unauthorized", "")
	body := ""
	if sr.Schema != nil {
		body = definitionName(sr.Kind.Group, sr.Kind.Version, sr.Kind.Kind)
	}
	item := map[string]any{"parameters": params}
	if sr.Get != nil {
		item["get"] = b.op("read"+name+title, "read "+sub+" of the specified "+r.Kind, "get", kind, nil, "", nil,
			map[string]any{"200": b.response("OK", ""), "401": unauthorized})
	}
	if sr.Stream != nil {
		item["get"] = b.op("read"+name+title, "stream "+sub+" of the specified "+r.Kind, "get", kind, nil, "", nil,
			map[string]any{"200": b.response("OK", ""), "401": unauthorized})
	}
	if sr.Create != nil {
		item["post"] = b.op("create"+name+title, "create "+sub+" of the specified "+r.Kind, "post", kind, writeParams, body, []string{"application/json", "application/yaml"},
			map[string]any{"200": b.response("OK", ""), "201": b.response("Created", ""), "401": unauthorized})
	}
	if sr.Update != nil {
		item["put"] = b.op("replace"+name+title, "replace "+sub+" of the specified "+r.Kind, "put", kind, writeParams, body, []string{"application/json", "application/yaml"},
			map[string]any{"200": b.response("OK", ""), "401": unauthorized})
	}
	return item
}

// subresourceDefinitions returns the schemas of a type's custom subresource
// kinds that declare one (and are not the type's own kind).
func subresourceDefinitions(r *registry.Resource, v3 bool, ref func(string) string) map[string]any {
	out := map[string]any{}
	for _, sub := range r.Subresources.CustomNames() {
		sr := r.Subresources.Custom[sub]
		if sr.Schema == nil || sr.Kind == r.GroupVersionKind() {
			continue
		}
		fake := registry.Resource{Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind, Schema: sr.Schema}
		out[definitionName(sr.Kind.Group, sr.Kind.Version, sr.Kind.Kind)] = schemaMap(&fake, ref, v3)
	}
	return out
}
