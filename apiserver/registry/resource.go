// Package registry holds kapi's resource types and the generic store that
// implements every verb of a stored resource on top of a storage.Store.
//
// A Resource describes one type: its names, scope, schema, subresources,
// printer columns and optional strategy hooks. A Registry is the live set of
// resources an API serves; types can be added, replaced and removed while the
// server runs. A Store is the object lifecycle for one resource: names, uids,
// timestamps, generation, resourceVersion preconditions, validation, encoding.
package registry

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/schema/rules"
)

// Object is a generic decoded JSON object: maps, slices, strings,
// json.Number, bools and nil. One exception: after a create's field manager
// has run, metadata.managedFields[0].fieldsV1 is a json.RawMessage (the JSON
// text of the field set, as Kubernetes' FieldsV1 holds it); validating
// admission hooks and Result.Object see it so.
type Object = map[string]any

// Resource describes one resource type in one group version.
type Resource struct {
	// Group is the API group; "" is the core group, served under /api.
	Group string
	// Version is the API version, e.g. "v1".
	Version string
	// Resource is the plural, lower-case name used in URLs, e.g. "widgets".
	Resource string
	// Singular is the singular name (default: Kind in lower case).
	Singular string
	// Kind is the object kind, e.g. "Widget".
	Kind string
	// ListKind is the collection kind (default: Kind + "List").
	ListKind string
	// ShortNames are kubectl aliases, e.g. "wd".
	ShortNames []string
	// Categories group resources for kubectl, e.g. "all".
	Categories []string
	// Namespaced says whether objects live in namespaces.
	Namespaced bool
	// Schema is the structural OpenAPI v3 schema of the object. Required.
	Schema *schema.Schema
	// Subresources declares the status and scale subresources.
	Subresources Subresources
	// PrinterColumns are the Table columns after Name (kubectl get); a
	// column of Format "name" places the name itself, and Name then does
	// not come first.
	PrinterColumns []Column
	// SelectableFields are extra JSON paths (e.g. ".spec.color") usable in
	// field selectors beyond metadata.name and metadata.namespace.
	SelectableFields []string
	// FieldLabels are selectable fields whose label is not their path:
	// label → JSON path (core v1 events select "source" on
	// ".source.component").
	FieldLabels map[string]string
	// Strategy holds optional hooks; nil hooks do nothing.
	Strategy Strategy
	// Admission are the type's admission hooks (after the registry's own).
	Admission []AdmissionHook
	// Protobuf, when set, is the type's protobuf message, wire-compatible
	// with the generated type of its clients (field numbers and types):
	// objects and lists are then served as application/vnd.kubernetes.protobuf
	// and accepted in request bodies. Without it a protobuf-only request is
	// answered 406 and a protobuf body 415, as kube-apiserver does for custom
	// resources. The list kind is always ListMeta metadata = 1, items = 2.
	Protobuf *codec.Message
	// Options tune the generic lifecycle where built-in and custom types of
	// Kubernetes differ.
	Options Options
	// StoredAs, when set, makes the type a view of another type's stored
	// objects, converted both ways (events.k8s.io/v1 events are core v1
	// events). See StoredAs.
	StoredAs *StoredAs
	// Deprecated marks the version deprecated: every request to it is
	// answered with a Warning header, DeprecationWarning or by default
	// "<group>/<version> <Kind> is deprecated" (and, among several
	// versions, "; use <group>/<version> <Kind>" naming the highest served
	// version that is not deprecated and ranks above it), as kube-apiserver
	// warns for a CRD version.
	Deprecated         bool
	DeprecationWarning string
	// Unserved keeps a version of a type registered with RegisterVersions
	// without serving it: objects stored in it stay readable (through the
	// served versions) until a migration has rewritten them, after which
	// the version can be removed. Not for Register.
	Unserved bool
	// Virtual, when set, makes the type virtual: nothing is stored, and
	// each verb it serves is a host function (a review endpoint such as
	// SelfSubjectAccessReview, or computed objects). Subresources, Strategy
	// (except Validate) and Options do not apply. See Virtual.
	Virtual *Virtual

	fieldPaths     map[string][]string // selectable field label → path, set by complete
	rules          *rules.Validator    // the schema's x-kubernetes-validations, compiled by complete
	storageVersion string              // the Versions' storage version, set by RegisterVersions
}

// StorageVersion returns the version the type's objects are written in:
// the storage version of a type registered with RegisterVersions (the
// same for each of its versions), otherwise the resource's own version.
func (r *Resource) StorageVersion() string {
	if r.storageVersion != "" {
		return r.storageVersion
	}
	return r.Version
}

// Options tune how the generic store treats a resource, for the few places
// where Kubernetes' built-in types and its custom resources behave differently.
type Options struct {
	// UnconditionalUpdate allows a PUT without metadata.resourceVersion (the
	// write then applies to whatever is current). Kubernetes allows it for
	// built-in types such as configmaps and refuses it (422) for custom
	// resources. Default false.
	UnconditionalUpdate bool
	// CreateOnUpdate makes a PUT without metadata.resourceVersion to an
	// object that does not exist create it (201), as Kubernetes does for
	// leases and events. Default false: 404.
	CreateOnUpdate bool
	// TTL, when positive, makes objects expire: the controllers delete an
	// object TTL after its last write, as etcd leases expire events in
	// Kubernetes (--event-ttl). Default 0: objects live until deleted.
	TTL time.Duration
	// NoGeneration leaves metadata.generation unset, as Kubernetes does for
	// types without a spec (configmaps, namespaces). Default false: generation
	// starts at 1 and grows with every change outside metadata and status.
	NoGeneration bool
	// OmitItemTypeMeta leaves kind and apiVersion out of the items of a list,
	// as kube-apiserver does for built-in types. Default false (items carry
	// them, as custom resource lists do).
	OmitItemTypeMeta bool
	// OmitEmpty names top-level fields that are left out of a written
	// object when null or empty objects, as kube-apiserver leaves out a
	// built-in type's empty maps (a ConfigMap's data). Empty metadata
	// fields (labels, annotations, finalizers, ownerReferences,
	// generateName) are left out of every type's objects (meta.OmitEmpty).
	OmitEmpty []string
	// TypedDecoding makes a value of the wrong JSON type in a body (a number
	// where the schema says string, an integer written "2.0" or "1e2") a
	// 400 BadRequest, as kube-apiserver answers for its built-in types, which
	// it decodes into Go structs, whatever the fieldValidation level.
	// Default false: 422 Invalid, as for custom resources (which store
	// "1e2" as 100).
	TypedDecoding bool
	// StandardFinalizers refuses (422) a finalizer name without a "/" that
	// is not one of Kubernetes' own (kubernetes, orphan, foregroundDeletion),
	// as kube-apiserver does for its built-in types. Default false: such a
	// name is accepted with a warning when added, as for custom resources.
	StandardFinalizers bool
	// NameValidation checks metadata.name and returns one message per problem.
	// Default: a DNS-1123 subdomain.
	NameValidation func(name string) []string
	// StrategicMerge serves strategic merge patch
	// (application/strategic-merge-patch+json), as kube-apiserver does for
	// all its built-in types, whatever their group: client-go's
	// events.k8s.io/v1 recorder sends its series updates so. Default: only
	// core-group types and types whose schema declares merge rules
	// (x-kubernetes-patch-strategy, x-kubernetes-patch-merge-key); custom
	// resources answer it 415, as in Kubernetes.
	StrategicMerge bool
}

// Subresources declares the subresources a type has.
type Subresources struct {
	// Status enables the /status subresource: writes to the main resource
	// ignore .status and writes to /status change only .status.
	Status bool
	// Scale, when set, enables the /scale subresource.
	Scale *Scale
	// Custom are host-implemented subresources by name (e.g. "restart",
	// "log"), served at /<resource>/<name>/<subresource> and authorized as
	// "<resource>/<subresource>". The names status, scale and finalize are
	// reserved. See Subresource.
	Custom map[string]Subresource
}

// Scale maps the /scale subresource onto an object's fields.
type Scale struct {
	// SpecReplicasPath is the JSON path of the desired replicas, e.g. ".spec.replicas".
	SpecReplicasPath string
	// StatusReplicasPath is the JSON path of the observed replicas, e.g. ".status.replicas".
	StatusReplicasPath string
	// LabelSelectorPath, optional, is the JSON path of the label selector string.
	LabelSelectorPath string
}

// Column is one Table column, as in a CRD's additionalPrinterColumns.
type Column struct {
	Name string
	Type string // integer, number, string, boolean, date
	// DefinitionType, when set, is the type the Table's column definition
	// declares instead of Type, which still says how cells are rendered:
	// kube-apiserver's built-in printers declare "string" for ages and
	// counts.
	DefinitionType string
	Format         string
	Description    string
	Priority       int32
	// JSONPath selects the value, e.g. ".spec.size".
	JSONPath string
	// Value, when set, computes the cell instead of JSONPath (for built-in
	// columns such as a ConfigMap's number of keys). obj is the decoded
	// object without metadata.managedFields; it must not be modified. In a
	// date column, a timestamp it returns (RFC 3339 text or a time.Time) is
	// shown as an age, as a JSONPath date column's is.
	Value func(obj Object) any
	// Missing, when set, is the cell of a JSONPath column that finds no
	// value of its type (default null, as a custom resource's column):
	// kube-apiserver's built-in printers show "<unknown>" for a missing
	// time.
	Missing any
}

// Strategy holds optional hooks into the generic lifecycle. Each receives the
// generic object after defaulting and pruning; mutations are kept.
type Strategy struct {
	// CheckBody refuses a request body before anything else is done with
	// it, as kube-apiserver's decoding into a built-in type's Go struct
	// does (a string that is not base64 where the struct has []byte, say).
	// Return a *meta.StatusError: DecodeError makes kube-apiserver's 400.
	CheckBody func(obj Object) error
	// PrepareForCreate adjusts a new object before validation.
	PrepareForCreate func(ctx context.Context, obj Object)
	// PrepareForUpdate adjusts an updated object before validation; old is
	// the current stored object and must not be changed.
	PrepareForUpdate func(ctx context.Context, obj, old Object)
	// Validate checks a new object beyond its schema.
	Validate func(ctx context.Context, obj Object) meta.ErrorList
	// ValidateUpdate checks an update beyond its schema.
	ValidateUpdate func(ctx context.Context, obj, old Object) meta.ErrorList
	// ValidateStatusUpdate checks, besides the above, a write to /status
	// (kube-apiserver's status strategy): rules that hold only for what a
	// status writer sets.
	ValidateStatusUpdate func(ctx context.Context, obj, old Object) meta.ErrorList
	// PrepareForDelete adjusts an object that starts waiting for its
	// finalizers (it already has its deletionTimestamp).
	PrepareForDelete func(ctx context.Context, obj Object)
	// PendingFinalization reports that an object being deleted must wait for
	// something besides metadata.finalizers (a namespace waits for its
	// spec.finalizers).
	PendingFinalization func(obj Object) bool
}

// GroupVersion returns the group version of the resource.
func (r *Resource) GroupVersion() meta.GroupVersion {
	return meta.GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupVersionResource returns the group, version and resource name.
func (r *Resource) GroupVersionResource() meta.GroupVersionResource {
	return meta.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// GroupResource returns the group and resource name.
func (r *Resource) GroupResource() meta.GroupResource {
	return meta.GroupResource{Group: r.Group, Resource: r.Resource}
}

// GroupVersionKind returns the kind of the objects.
func (r *Resource) GroupVersionKind() meta.GroupVersionKind {
	return meta.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// APIVersion returns the apiVersion string of the objects.
func (r *Resource) APIVersion() string { return r.GroupVersion().String() }

// ServesFinalize says the type serves the finalize subresource: a PUT that
// replaces the object's spec.finalizers. Only the core namespaces do, as in
// Kubernetes.
func (r *Resource) ServesFinalize() bool {
	return r.Group == "" && r.Resource == "namespaces"
}

// ServesStrategicMerge says PATCH accepts strategic merge patches: for
// core-group types, types with Options.StrategicMerge and types whose
// schema declares merge rules.
func (r *Resource) ServesStrategicMerge() bool {
	return r.Group == "" || r.Options.StrategicMerge || patch.DeclaresStrategicMerge(r.Schema)
}

var (
	dnsLabelRE   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	groupRE      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	versionRE    = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
	kindRE       = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	columnTypeRE = regexp.MustCompile(`^(integer|number|string|boolean|date)$`)
)

// complete fills defaults and checks the registration.
func (r *Resource) complete() error {
	if r.Group == "core" {
		return fmt.Errorf(`registry: group "core" is reserved: the core group is ""`)
	}
	if r.Group != "" && (!groupRE.MatchString(r.Group) || len(r.Group) > 253) {
		return fmt.Errorf("registry: invalid group %q", r.Group)
	}
	if !versionRE.MatchString(r.Version) {
		return fmt.Errorf("registry: invalid version %q (want v1, v2beta1, ...)", r.Version)
	}
	if !dnsLabelRE.MatchString(r.Resource) {
		return fmt.Errorf("registry: invalid resource name %q (want a lower-case plural)", r.Resource)
	}
	if !kindRE.MatchString(r.Kind) {
		return fmt.Errorf("registry: invalid kind %q", r.Kind)
	}
	if r.Singular == "" {
		r.Singular = strings.ToLower(r.Kind)
	}
	if !dnsLabelRE.MatchString(r.Singular) {
		return fmt.Errorf("registry: invalid singular name %q", r.Singular)
	}
	if r.ListKind == "" {
		r.ListKind = r.Kind + "List"
	}
	if !kindRE.MatchString(r.ListKind) {
		return fmt.Errorf("registry: invalid list kind %q", r.ListKind)
	}
	for _, s := range r.ShortNames {
		if !dnsLabelRE.MatchString(s) {
			return fmt.Errorf("registry: invalid short name %q", s)
		}
	}
	for _, c := range r.Categories {
		if !dnsLabelRE.MatchString(c) {
			return fmt.Errorf("registry: invalid category %q", c)
		}
	}
	if r.Schema == nil {
		return fmt.Errorf("registry: %s has no schema", r.GroupResource())
	}
	if r.Subresources.Scale != nil {
		sc := r.Subresources.Scale
		if !strings.HasPrefix(sc.SpecReplicasPath, ".") || !strings.HasPrefix(sc.StatusReplicasPath, ".") {
			return fmt.Errorf("registry: %s: scale replicas paths must be JSON paths like .spec.replicas", r.GroupResource())
		}
	}
	if v := r.StoredAs; v != nil && (v.Resource == "" || v.FromStored == nil || v.ToStored == nil || r.Virtual != nil) {
		return fmt.Errorf("registry: %s: StoredAs needs a resource and both conversions, and a stored type", r.GroupResource())
	}
	if r.Deprecated && r.DeprecationWarning == "" {
		r.DeprecationWarning = fmt.Sprintf("%s %s is deprecated", r.APIVersion(), r.Kind)
	}
	v, err := rules.Compile(r.Schema, rules.Limits{})
	if err != nil {
		return fmt.Errorf("registry: %s: %w", r.GroupResource(), err)
	}
	r.rules = v
	if err := r.completeExtensions(); err != nil {
		return err
	}
	for _, c := range r.PrinterColumns {
		if c.Name == "" || !columnTypeRE.MatchString(c.Type) || (c.Value == nil && !strings.HasPrefix(c.JSONPath, ".")) {
			return fmt.Errorf("registry: %s: invalid printer column %+v", r.GroupResource(), c)
		}
	}
	r.fieldPaths = map[string][]string{}
	for _, f := range r.SelectableFields {
		if !strings.HasPrefix(f, ".") {
			return fmt.Errorf("registry: %s: selectable field %q must be a JSON path like .spec.color", r.GroupResource(), f)
		}
		r.fieldPaths[f[1:]] = strings.Split(f[1:], ".")
	}
	for label, f := range r.FieldLabels {
		if !strings.HasPrefix(f, ".") || label == "" {
			return fmt.Errorf("registry: %s: field label %q must name a JSON path like .spec.color", r.GroupResource(), label)
		}
		r.fieldPaths[label] = strings.Split(f[1:], ".")
	}
	return nil
}
