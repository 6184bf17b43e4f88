package openapi

import (
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

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
func (b opBuilder) op(id, desc, action string, kind meta.GroupVersionKind, params []queryParam, body string, contentTypes []string, responses map[string]any) map[string]any {
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

func tagOf(k meta.GroupVersionKind) string {
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
	kind := r.GroupVersionKind()
	def := definitionName(r.Group, r.Version, r.Kind)
	listDef := definitionName(r.Group, r.Version, r.ListKind)
	base := basePath(r)
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
	patchTypes := patchTypesOf(r)
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

// patchTypesOf returns the patch types a resource accepts: strategic merge
// patch where it is served (Resource.ServesStrategicMerge).
func patchTypesOf(r *registry.Resource) []string {
	types := []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
	if r.ServesStrategicMerge() {
		types = append(types, "application/strategic-merge-patch+json")
	}
	return types
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
	kind := r.GroupVersionKind()
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
	kind := sr.Kind
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
