package openapi

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

const (
	metaPkg        = "io.k8s.apimachinery.pkg.apis.meta.v1."
	objectMetaName = metaPkg + "ObjectMeta"
	listMetaName   = metaPkg + "ListMeta"
	statusName     = metaPkg + "Status"
	patchName      = metaPkg + "Patch"
	deleteOptsName = metaPkg + "DeleteOptions"
)

// isKubeAPIGroup reports whether kube-apiserver serves group from
// k8s.io/api, naming its kinds io.k8s.api.<first label>.<version>.<Kind>.
// Other groups in the k8s.io domain are served as CRDs
// (gateway.networking.k8s.io) and named by their reversed group.
func isKubeAPIGroup(group string) bool {
	switch group {
	case "admissionregistration.k8s.io", "apps", "authentication.k8s.io", "authorization.k8s.io",
		"autoscaling", "batch", "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
		"events.k8s.io", "extensions", "flowcontrol.apiserver.k8s.io", "internal.apiserver.k8s.io",
		"networking.k8s.io", "node.k8s.io", "policy", "rbac.authorization.k8s.io", "resource.k8s.io",
		"scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io":
		return true
	}
	return false
}

// definitionName is the OpenAPI name of a kind, as kube-apiserver names
// it: io.k8s.api.core.v1.ConfigMap for the core group, the group's first
// label under io.k8s.api for its other groups (isKubeAPIGroup;
// io.k8s.api.coordination.v1.Lease; a CustomResourceDefinition has its
// package's), the reversed group otherwise (dev.example.v1.Widget).
func definitionName(group, version, kind string) string {
	switch {
	case group == "":
		return "io.k8s.api.core." + version + "." + kind
	case group == "apiextensions.k8s.io":
		return "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions." + version + "." + kind
	case isKubeAPIGroup(group):
		first, _, _ := strings.Cut(group, ".")
		return "io.k8s.api." + first + "." + version + "." + kind
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

// DefinitionKey is schema.DefinitionKey: subschemas of the same name must
// be the same.
const DefinitionKey = schema.DefinitionKey

// hoistDefinitions moves every subschema of s (properties, items,
// additionalProperties, at any depth) that names its definition
// (DefinitionKey) into defs, leaving a reference in its place.
func hoistDefinitions(s map[string]any, defs map[string]any, ref func(string) string, v3 bool) {
	if props, ok := s["properties"].(map[string]any); ok {
		for k, p := range props {
			props[k] = hoistNode(p, defs, ref, v3)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if _, ok := s[k].(map[string]any); ok {
			s[k] = hoistNode(s[k], defs, ref, v3)
		}
	}
}

func hoistNode(n any, defs map[string]any, ref func(string) string, v3 bool) any {
	m, ok := n.(map[string]any)
	if !ok {
		return n
	}
	hoistDefinitions(m, defs, ref, v3)
	name, _ := m[DefinitionKey].(string)
	if !validDefinitionName(name) {
		return m // StripDefinitionNames removes the key
	}
	def := maps.Clone(m)
	StripDefinitionNames(def)
	if _, ok := defs[name]; !ok {
		defs[name] = def
	}
	// The description is the definition's (a type's, in the built-in
	// schemas): kubectl explain would show it twice on the reference too.
	if v3 {
		return map[string]any{"allOf": []any{map[string]any{"$ref": ref(name)}}}
	}
	return map[string]any{"$ref": ref(name)}
}

// validDefinitionName reports whether name may name a definition: letters,
// digits, '.', '_' and '-' (it is part of a reference's JSON pointer).
func validDefinitionName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// StripDefinitionNames removes DefinitionKey from a schema (a generic JSON
// value) and its subschemas, not from property names: what hoisting left
// (a root, subschemas under allOf, anyOf, oneOf or not, invalid names),
// and a CRD's schema, which cannot carry it.
func StripDefinitionNames(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, DefinitionKey)
		if props, ok := v["properties"].(map[string]any); ok {
			for _, p := range props {
				StripDefinitionNames(p)
			}
		}
		for _, k := range []string{"items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"} {
			StripDefinitionNames(v[k])
		}
	case []any:
		for _, c := range v {
			StripDefinitionNames(c)
		}
	}
}
