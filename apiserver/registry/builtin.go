package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// mustSchema parses an OpenAPI v3 schema written as JSON; it is only used on
// constants of this package.
func mustSchema(js string) *schema.Schema {
	var s schema.Schema
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		panic(fmt.Sprintf("registry: bad built-in schema: %v", err))
	}
	return &s
}

const typeMetaProps = `"apiVersion":{"type":"string","description":"APIVersion defines the versioned schema of this representation of an object."},
"kind":{"type":"string","description":"Kind is a string value representing the REST resource this object represents."},
"metadata":{"type":"object","description":"Standard object's metadata."}`

// Namespaces returns the core v1 namespaces resource. kapi serves it on every
// API: namespaced types need their namespace to exist.
func Namespaces() Resource {
	return Resource{
		Version:    "v1",
		Resource:   "namespaces",
		Kind:       "Namespace",
		ShortNames: []string{"ns"},
		Schema: mustSchema(`{"type":"object","description":"Namespace provides a scope for Names.","properties":{` + typeMetaProps + `,
"spec":{"x-kapi-definition":"io.k8s.api.core.v1.NamespaceSpec","type":"object","description":"Spec defines the behavior of the Namespace.","properties":{"finalizers":{"type":"array","items":{"type":"string"},"description":"Finalizers is an opaque list of values that must be empty to permanently remove object from storage."}}},
"status":{"x-kapi-definition":"io.k8s.api.core.v1.NamespaceStatus","type":"object","description":"Status describes the current status of a Namespace.","properties":{"phase":{"type":"string","description":"Phase is the current lifecycle phase of the namespace."},"conditions":{"type":"array","description":"Represents the latest available observations of a namespace's current state.","items":{"x-kapi-definition":"io.k8s.api.core.v1.NamespaceCondition","type":"object","description":"NamespaceCondition contains details about state of namespace.","properties":{
"type":{"type":"string","description":"Type of namespace controller condition."},
"status":{"type":"string","description":"Status of the condition, one of True, False, Unknown."},
"lastTransitionTime":{"type":"string","format":"date-time","description":"Last time the condition transitioned from one status to another."},
"reason":{"type":"string","description":"Unique, one-word, CamelCase reason for the condition's last transition."},
"message":{"type":"string","description":"Human-readable message indicating details about last transition."}}}}}}}}`),
		Subresources:     Subresources{Status: true},
		SelectableFields: []string{".status.phase"},
		Admission:        []AdmissionHook{immortalNamespaces},
		Protobuf:         namespaceMessage,
		PrinterColumns: []Column{
			{Name: "Status", Type: "string", JSONPath: ".status.phase", Missing: "", Description: "The phase of the namespace."},
			ageColumn,
		},
		Options: Options{
			UnconditionalUpdate: true,
			NoGeneration:        true,
			OmitItemTypeMeta:    true,
			TypedDecoding:       true,
			StandardFinalizers:  true,
			NameValidation:      meta.IsDNS1123Label,
		},
		Strategy: Strategy{
			PrepareForCreate: func(_ context.Context, obj Object) {
				obj["status"] = map[string]any{"phase": "Active"}
				spec, _ := obj["spec"].(map[string]any)
				if spec == nil {
					spec = map[string]any{}
					obj["spec"] = spec
				}
				// kube-apiserver adds its finalizer to whatever the
				// client asked for: the namespace controller empties a
				// namespace before it goes.
				switch fins := spec["finalizers"].(type) {
				case nil:
					spec["finalizers"] = []any{NamespaceFinalizer}
				case []any: // another type is for validation to refuse
					if !slices.Contains(fins, any(NamespaceFinalizer)) {
						spec["finalizers"] = append(fins, NamespaceFinalizer)
					}
				}
				setNamespaceNameLabel(obj)
			},
			PrepareForUpdate: func(_ context.Context, obj, old Object) {
				// spec.finalizers changes only through /finalize, status only
				// through /status.
				fins, _, _ := meta.NestedSlice(old, "spec", "finalizers")
				spec, _ := obj["spec"].(map[string]any)
				if spec == nil {
					spec = map[string]any{}
					obj["spec"] = spec
				}
				if fins != nil {
					spec["finalizers"] = fins
				} else {
					delete(spec, "finalizers")
				}
				setNamespaceNameLabel(obj)
			},
			PrepareForDelete: func(_ context.Context, obj Object) {
				status, _ := obj["status"].(map[string]any)
				if status == nil {
					status = map[string]any{}
					obj["status"] = status
				}
				status["phase"] = "Terminating"
			},
			PendingFinalization: func(obj Object) bool {
				fins, _, _ := meta.NestedSlice(obj, "spec", "finalizers")
				return len(fins) > 0
			},
			Validate:             func(_ context.Context, obj Object) meta.ErrorList { return validateNamespace(obj) },
			ValidateStatusUpdate: func(_ context.Context, obj, _ Object) meta.ErrorList { return validateNamespaceStatus(obj) },
		},
	}
}

// validateNamespace checks a namespace's spec.finalizers as kube-apiserver
// does: qualified names, and a name without "/" only if it is standard.
func validateNamespace(obj Object) meta.ErrorList {
	var errs meta.ErrorList
	p := meta.NewPath("spec", "finalizers")
	fins, _, _ := meta.NestedSlice(obj, "spec", "finalizers")
	for _, f := range fins {
		name, _ := f.(string)
		for _, msg := range meta.IsQualifiedName(name) {
			errs = append(errs, meta.Invalid(p, name, msg))
		}
		if unqualifiedFinalizer(name) {
			errs = append(errs, unqualifiedFinalizerError(p, name))
		}
	}
	return errs
}

// validateNamespaceStatus checks a write to a namespace's /status: the
// phase follows the deletion (Active before it, Terminating after), as
// kube-apiserver's status strategy requires.
func validateNamespaceStatus(obj Object) meta.ErrorList {
	phase, _, _ := meta.NestedString(obj, "status", "phase")
	p := meta.NewPath("status", "Phase") // kube-apiserver's path
	if meta.GetDeletionTimestamp(obj) == nil {
		if phase != "Active" {
			return meta.ErrorList{meta.Invalid(p, phase, "may only be 'Active' if `deletionTimestamp` is empty")}
		}
	} else if phase != "Terminating" {
		return meta.ErrorList{meta.Invalid(p, phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}

// Protobuf messages of the built-in types, wire-compatible with
// k8s.io/api/core/v1 (generated.proto).
var (
	configMapMessage = codec.MustMessage("ConfigMap",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "data", Number: 2, Kind: codec.String, Map: true},
		codec.Field{Name: "binaryData", Number: 3, Kind: codec.Bytes, Map: true},
		codec.Field{Name: "immutable", Number: 4, Kind: codec.Bool, Keep: true},
	)
	namespaceMessage = codec.MustMessage("Namespace",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "spec", Number: 2, Kind: codec.MessageKind, Message: codec.MustMessage("NamespaceSpec",
			codec.Field{Name: "finalizers", Number: 1, Kind: codec.String, Repeated: true})},
		codec.Field{Name: "status", Number: 3, Kind: codec.MessageKind, Message: codec.MustMessage("NamespaceStatus",
			codec.Field{Name: "phase", Number: 1, Kind: codec.String},
			codec.Field{Name: "conditions", Number: 2, Kind: codec.MessageKind, Repeated: true, Message: codec.MustMessage("NamespaceCondition",
				codec.Field{Name: "type", Number: 1, Kind: codec.String},
				codec.Field{Name: "status", Number: 2, Kind: codec.String},
				codec.Field{Name: "lastTransitionTime", Number: 4, Kind: codec.Time},
				codec.Field{Name: "reason", Number: 5, Kind: codec.String},
				codec.Field{Name: "message", Number: 6, Kind: codec.String})})},
	)
)

// immortalNamespaceNames are the namespaces that may not be deleted, as
// kube-apiserver's NamespaceLifecycle admission refuses to delete them.
var immortalNamespaceNames = []string{"default", "kube-system", "kube-public"}

// immortalNamespaces refuses the deletion of immortalNamespaceNames with
// kube-apiserver's 403.
var immortalNamespaces = AdmissionHook{
	Name:        "NamespaceLifecycle",
	Operations:  []Operation{OperationDelete},
	SideEffects: SideEffectsNone,
	Validate: func(_ context.Context, req *AdmissionRequest) error {
		if contains(immortalNamespaceNames, req.Name) {
			return meta.NewForbidden(meta.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}, req.Name, "this namespace may not be deleted")
		}
		return nil
	},
}

// NamespaceFinalizer is the spec finalizer of every namespace: the namespace
// controller removes it once the namespace is empty.
const NamespaceFinalizer = "kubernetes"

// namespaceNameLabel is the label Kubernetes puts on every namespace.
const namespaceNameLabel = "kubernetes.io/metadata.name"

func setNamespaceNameLabel(obj Object) {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		md["labels"] = labels
	}
	labels[namespaceNameLabel] = md["name"]
}

// ConfigMaps returns the core v1 configmaps resource, with Kubernetes'
// validation: data keys, no key in both data and binaryData, 1 MiB in total,
// and immutability once immutable is true.
func ConfigMaps() Resource {
	return Resource{
		Version:    "v1",
		Resource:   "configmaps",
		Kind:       "ConfigMap",
		ShortNames: []string{"cm"},
		Namespaced: true,
		Schema: mustSchema(`{"type":"object","description":"ConfigMap holds configuration data for pods to consume.","properties":{` + typeMetaProps + `,
"data":{"type":"object","additionalProperties":{"type":"string"},"description":"Data contains the configuration data."},
"binaryData":{"type":"object","additionalProperties":{"type":"string","format":"byte"},"description":"BinaryData contains the binary data."},
"immutable":{"type":"boolean","description":"Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated."}}}`),
		Protobuf: configMapMessage,
		PrinterColumns: []Column{
			{Name: "Data", Type: "integer", DefinitionType: "string", Description: "The number of keys in data and binaryData.", Value: func(obj Object) any {
				d, _ := obj["data"].(map[string]any)
				b, _ := obj["binaryData"].(map[string]any)
				return len(d) + len(b)
			}},
			ageColumn,
		},
		Options: builtinOptions("data", "binaryData"),
		Strategy: Strategy{
			Validate: func(_ context.Context, obj Object) meta.ErrorList { return validateConfigMap(obj) },
			ValidateUpdate: func(_ context.Context, obj, old Object) meta.ErrorList {
				return append(immutableDataErrors(obj, old, "data", "binaryData"), validateConfigMap(obj)...)
			},
		},
	}
}

// immutableDataErrors is what an update of an object with immutable: true
// (a configmap or secret) may not do: unset immutable or change any of the
// fields.
func immutableDataErrors(obj, old Object, fields ...string) meta.ErrorList {
	if oldImm, _ := old["immutable"].(bool); !oldImm {
		return nil
	}
	var errs meta.ErrorList
	if imm, _ := obj["immutable"].(bool); !imm {
		errs = append(errs, meta.Forbidden(meta.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	for _, f := range fields {
		if !meta.DeepEqual(obj[f], old[f]) && !(emptyObject(obj[f]) && emptyObject(old[f])) {
			errs = append(errs, meta.Forbidden(meta.NewPath(f), "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// emptyObject reports whether v is absent, null or an empty object: the
// same map to an immutable object (objects stored before empty maps were
// left out may hold one).
func emptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return v == nil || ok && len(m) == 0
}

// builtinOptions are the Options of kube-apiserver's built-in types
// without a spec (configmaps, secrets), whose maps named omitEmpty are
// left out when empty.
func builtinOptions(omitEmpty ...string) Options {
	return Options{UnconditionalUpdate: true, NoGeneration: true, OmitItemTypeMeta: true, TypedDecoding: true, StandardFinalizers: true,
		OmitEmpty: omitEmpty}
}

// prepareEveryWrite returns st with both prepare hooks running fn: what a
// built-in type does to every object written, created or updated.
func (st Strategy) prepareEveryWrite(fn func(Object)) Strategy {
	st.PrepareForCreate = func(_ context.Context, obj Object) { fn(obj) }
	st.PrepareForUpdate = func(_ context.Context, obj, _ Object) { fn(obj) }
	return st
}

// ageColumn is the Age column of kube-apiserver's built-in printers:
// declared a string, "<unknown>" for an object without a creation time (a
// bookmark's).
var ageColumn = Column{Name: "Age", Type: "date", DefinitionType: "string", JSONPath: ".metadata.creationTimestamp",
	Missing:     "<unknown>",
	Description: "CreationTimestamp is a timestamp representing the server time when this object was created."}

// isConfigMapKey matches [-._a-zA-Z0-9]+ (a hand-written check: it runs
// for every key of every configmap written).
func isConfigMapKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return k != ""
}

const maxConfigMapSize = 1 << 20

func validateConfigMap(obj Object) meta.ErrorList {
	data, _ := obj["data"].(map[string]any)
	bin, _ := obj["binaryData"].(map[string]any)
	if len(bin) == 0 && validConfigMapData(data) {
		return nil // the common case, without sorting keys or building paths
	}
	return configMapErrors(data, bin)
}

// configMapErrors validates a configmap's data and binaryData, in key order.
func configMapErrors(data, bin map[string]any) meta.ErrorList {
	var errs meta.ErrorList
	total := 0
	checkKey := func(p *meta.Path, k string) {
		if msg := configMapKeyProblem(k); msg != "" {
			errs = append(errs, meta.Invalid(p, k, msg))
		}
	}
	for _, k := range meta.SortedKeys(data) {
		checkKey(meta.NewPath("data").Key(k), k)
		if s, ok := data[k].(string); ok {
			total += len(s)
		}
	}
	for _, k := range meta.SortedKeys(bin) {
		p := meta.NewPath("binaryData").Key(k)
		checkKey(p, k)
		if _, dup := data[k]; dup {
			errs = append(errs, meta.Invalid(p, k, "duplicate of key present in data"))
		}
		if s, ok := bin[k].(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				errs = append(errs, meta.Invalid(p, "<binary>", "must be base64-encoded"))
			}
			total += len(b)
		}
	}
	if total > maxConfigMapSize {
		errs = append(errs, meta.TooLong(meta.NewPath(""), "", maxConfigMapSize))
	}
	return errs
}

// validConfigMapData reports whether data's keys are all valid and its
// values fit the size limit: validateConfigMap's answer for a configmap
// without binaryData, when that answer is no error.
func validConfigMapData(data map[string]any) bool {
	total := 0
	for k, v := range data {
		if configMapKeyProblem(k) != "" {
			return false
		}
		if s, ok := v.(string); ok {
			total += len(s)
		}
	}
	return total <= maxConfigMapSize
}

// configMapKeyProblem is what is wrong with a configmap key, or "".
func configMapKeyProblem(k string) string {
	switch {
	case len(k) > 253:
		return "must be no more than 253 characters"
	case !isConfigMapKey(k):
		return "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
	case k == "." || k == "..":
		return "must not be '.' or '..'"
	}
	return ""
}
