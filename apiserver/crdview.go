package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/openapi"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// CustomResourceDefinitions (apiextensions.k8s.io/v1) are a read-only view
// the server registers itself, as a virtual type with get and list: one
// CustomResourceDefinition per custom type the registry serves, rendered as
// kube-apiserver renders a CRD. kapi defines types in Go (Server.Register),
// not through CRD objects, so the view has no create, update, patch, delete
// or watch (405). Clients look at CRDs to learn what a kind is: kubectl, for
// a kind without a PATCH operation (a create-only review type), lists them
// before it validates an object on the client ("failed to check CRD"
// without them).
//
// A custom type is every registered, stored (not virtual) type whose group
// is not one of Kubernetes' own (isKubernetesGroup).

// crdResource is the view's group and resource.
var crdResource = meta.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// legacyKubernetesGroups are Kubernetes' built-in API groups without a
// domain (besides the core group "").
var legacyKubernetesGroups = map[string]bool{"apps": true, "autoscaling": true, "batch": true, "extensions": true, "policy": true}

// isKubernetesGroup reports whether group is one of Kubernetes' own: the
// core group "", the built-in groups without a domain (apps, autoscaling,
// batch, extensions, policy), and every group in the k8s.io or
// kubernetes.io domains, which Kubernetes reserves for its own APIs. Types
// in these groups reproduce built-in Kubernetes APIs (kube-apiserver serves
// them itself), so they are no CRDs.
func isKubernetesGroup(group string) bool {
	return group == "" || legacyKubernetesGroups[group] ||
		group == "k8s.io" || strings.HasSuffix(group, ".k8s.io") ||
		group == "kubernetes.io" || strings.HasSuffix(group, ".kubernetes.io")
}

// isCustomResource reports whether r is listed as a CRD.
func isCustomResource(r *registry.Resource) bool {
	return r.Virtual == nil && !isKubernetesGroup(r.Group)
}

// customResourceDefinition is apiextensions.k8s.io/v1 CustomResourceDefinition,
// the fields kapi fills.
type customResourceDefinition struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          crdSpec         `json:"spec" doc:"The type the CustomResourceDefinition describes."`
	Status        crdStatus       `json:"status,omitempty" doc:"The state of the CustomResourceDefinition."`
}

type crdSpec struct {
	Group      string        `json:"group" kapi:"required" doc:"The API group of the defined custom resource."`
	Names      crdNames      `json:"names" kapi:"required" doc:"The resource and kind names of the custom resource."`
	Scope      string        `json:"scope" kapi:"required,enum=Cluster|Namespaced" doc:"Whether the custom resource is cluster-scoped or namespaced."`
	Versions   []crdVersion  `json:"versions" kapi:"required" doc:"The API versions of the defined custom resource."`
	Conversion crdConversion `json:"conversion,omitempty" doc:"How custom resources are converted between versions."`
}

type crdNames struct {
	Plural     string   `json:"plural" kapi:"required" doc:"The plural name of the resource to serve (the URL path segment)."`
	Singular   string   `json:"singular,omitempty" doc:"The singular name of the resource."`
	ShortNames []string `json:"shortNames,omitempty" doc:"Short names for the resource, exposed in API discovery documents."`
	Kind       string   `json:"kind" kapi:"required" doc:"The serialized kind of the resource."`
	ListKind   string   `json:"listKind,omitempty" doc:"The serialized kind of the list for this resource."`
	Categories []string `json:"categories,omitempty" doc:"Grouped resources this custom resource belongs to (e.g. 'all')."`
}

type crdVersion struct {
	Name                     string            `json:"name" kapi:"required" doc:"The version name, e.g. v1."`
	Served                   bool              `json:"served" kapi:"required" doc:"Whether this version is served by the REST API."`
	Storage                  bool              `json:"storage" kapi:"required" doc:"Whether this version is used to persist custom resources to storage."`
	Deprecated               bool              `json:"deprecated,omitempty" doc:"Whether this version is deprecated: its API responses carry a warning header."`
	DeprecationWarning       *string           `json:"deprecationWarning,omitempty" doc:"The warning returned to API clients of this deprecated version."`
	Schema                   *crdValidation    `json:"schema,omitempty" doc:"The schema used for validation, pruning and defaulting of this version."`
	Subresources             *crdSubresources  `json:"subresources,omitempty" doc:"The subresources this version of the custom resource has."`
	AdditionalPrinterColumns []crdPrinterCol   `json:"additionalPrinterColumns,omitempty" doc:"Additional columns returned in Table output."`
	SelectableFields         []crdSelectableFd `json:"selectableFields,omitempty" doc:"The paths to fields that may be used as field selectors."`
}

type crdValidation struct {
	OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema,omitempty" doc:"The OpenAPI v3 schema of the custom resource."`
}

type crdSubresources struct {
	Status *struct{} `json:"status,omitempty" doc:"Set: the custom resource has a status subresource."`
	Scale  *crdScale `json:"scale,omitempty" doc:"Set: the custom resource has a scale subresource."`
}

type crdScale struct {
	SpecReplicasPath   string `json:"specReplicasPath" doc:"The JSON path of the desired replicas in the custom resource."`
	StatusReplicasPath string `json:"statusReplicasPath" doc:"The JSON path of the observed replicas in the custom resource."`
	LabelSelectorPath  string `json:"labelSelectorPath,omitempty" doc:"The JSON path of the label selector string in the custom resource."`
}

type crdPrinterCol struct {
	Name        string `json:"name" doc:"A human readable name for the column."`
	Type        string `json:"type" doc:"An OpenAPI type definition for this column."`
	Format      string `json:"format,omitempty" doc:"An optional OpenAPI type definition for this column."`
	Description string `json:"description,omitempty" doc:"A human readable description of this column."`
	Priority    int32  `json:"priority,omitempty" doc:"The importance of this column relative to others."`
	JSONPath    string `json:"jsonPath" doc:"A simple JSON path evaluated against each custom resource to produce the value of this column."`
}

type crdSelectableFd struct {
	JSONPath string `json:"jsonPath" doc:"A simple JSON path evaluated against each custom resource to produce a field selector value."`
}

type crdConversion struct {
	Strategy string                `json:"strategy" doc:"How custom resources are converted between versions: None or Webhook."`
	Webhook  *crdWebhookConversion `json:"webhook,omitempty" doc:"The conversion of a Webhook strategy."`
}

type crdWebhookConversion struct {
	ConversionReviewVersions []string `json:"conversionReviewVersions" doc:"The ConversionReview versions the conversion accepts."`
}

type crdStatus struct {
	Conditions     []crdCondition `json:"conditions,omitempty" doc:"The observations of the CustomResourceDefinition's current state."`
	AcceptedNames  crdNames       `json:"acceptedNames" doc:"The names actually being used to serve discovery."`
	StoredVersions []string       `json:"storedVersions" doc:"The versions of custom resources that were ever persisted."`
}

type crdCondition struct {
	Type               string     `json:"type" doc:"The type of the condition: Established, NamesAccepted."`
	Status             string     `json:"status" doc:"The status of the condition: True, False, Unknown."`
	LastTransitionTime *meta.Time `json:"lastTransitionTime,omitempty" doc:"The last time the condition changed."`
	Reason             string     `json:"reason,omitempty" doc:"A unique, one-word, CamelCase reason for the condition's last transition."`
	Message            string     `json:"message,omitempty" doc:"A human-readable message about the last transition."`
}

// crdView computes the CustomResourceDefinitions from the registry.
type crdView struct {
	reg *registry.Registry
	now func() time.Time

	mu sync.Mutex
	// since is when this server began serving each custom group/resource
	// (the CRDs' creationTimestamp); kept up to date on every registry change.
	since map[meta.GroupResource]time.Time
}

func newCRDView(reg *registry.Registry) *crdView {
	v := &crdView{reg: reg, now: time.Now, since: map[meta.GroupResource]time.Time{}}
	reg.OnChange(v.noteRegistrations)
	v.noteRegistrations()
	return v
}

// crdType is what the CRD of one custom type is rendered from: its
// versions (highest priority first, as discovery orders them, served or
// not), the storage version, the stored versions, whether its versions
// are converted by code (a type registered with RegisterVersions whose
// conversion is not None), and since when the server serves it.
type crdType struct {
	versions       []*registry.Resource
	storage        string
	storedVersions []string
	converted      bool
	since          time.Time
}

// current returns the served custom types by group/resource, recording
// the time the server began serving each.
func (v *crdView) current(ctx context.Context) (map[meta.GroupResource]*crdType, error) {
	byGR := map[meta.GroupResource]*crdType{}
	for _, r := range v.reg.Resources() {
		if !isCustomResource(r) {
			continue
		}
		gr := r.GroupResource()
		if ct := byGR[gr]; ct != nil {
			if ct.storedVersions == nil { // a set lists all its versions at once
				ct.versions = append(ct.versions, r)
			}
			continue
		}
		ct := &crdType{versions: []*registry.Resource{r}}
		if all, storageVersion, ok := v.reg.VersionsOf(gr); ok {
			rec, _, err := v.reg.TypeRecordOf(ctx, gr)
			if err != nil {
				return nil, meta.NewInternalError(err)
			}
			ct.versions, ct.storage, ct.storedVersions = all, storageVersion, rec.StoredVersions
			if len(ct.storedVersions) == 0 {
				ct.storedVersions = []string{storageVersion}
			}
			ct.converted = v.reg.ConvertsVersions(gr)
		}
		byGR[gr] = ct
	}
	for _, ct := range byGR {
		sort.SliceStable(ct.versions, func(i, j int) bool { return meta.VersionLess(ct.versions[j].Version, ct.versions[i].Version) })
		if ct.storage == "" {
			// Registered with Register, version by version: the highest
			// is the one the CRD shows as stored.
			ct.storage = ct.versions[0].Version
		}
		if len(ct.storedVersions) == 0 {
			ct.storedVersions = []string{ct.storage}
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for gr, ct := range byGR {
		t, ok := v.since[gr]
		if !ok { // registered after noteRegistrations ran
			t = v.now()
			v.since[gr] = t
		}
		ct.since = t
	}
	return byGR, nil
}

// noteRegistrations records when each custom type began to be served
// (the CRDs' creationTimestamp), at every registry change.
func (v *crdView) noteRegistrations() {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	seen := map[meta.GroupResource]bool{}
	for _, r := range v.reg.Resources() {
		if isCustomResource(r) {
			gr := r.GroupResource()
			seen[gr] = true
			if _, ok := v.since[gr]; !ok {
				v.since[gr] = now
			}
		}
	}
	for gr := range v.since {
		if !seen[gr] {
			delete(v.since, gr) // registered again later: a new CRD
		}
	}
}

// get serves GET customresourcedefinitions/<plural>.<group>.
func (v *crdView) get(ctx context.Context, req *registry.Request) (registry.Object, error) {
	byGR, err := v.current(ctx)
	if err != nil {
		return nil, err
	}
	plural, group, ok := strings.Cut(req.Name, ".")
	ct := byGR[meta.GroupResource{Group: group, Resource: plural}]
	if !ok || ct == nil {
		return nil, meta.NewNotFound(crdResource, req.Name)
	}
	return renderCRD(ct)
}

// list serves GET customresourcedefinitions: every custom type by name,
// filtered by the label and field selectors of the request (the objects
// have no labels; metadata.name and metadata.namespace are selectable).
func (v *crdView) list(ctx context.Context, req *registry.Request) ([]registry.Object, error) {
	var labels meta.LabelSelector
	if ls := req.Query.Get("labelSelector"); ls != "" {
		sel, err := meta.ParseLabelSelector(ls)
		if err != nil {
			return nil, meta.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		labels = sel
	}
	var fields meta.FieldSelector
	if fs := req.Query.Get("fieldSelector"); fs != "" {
		sel, err := meta.ParseFieldSelector(fs)
		if err != nil {
			return nil, meta.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		for _, r := range sel.Requirements() {
			if !req.Store.SupportsField(r.Field) {
				return nil, meta.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %s", r.Field, req.Store.SelectableFieldList()))
			}
		}
		fields = sel
	}
	byGR, err := v.current(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(byGR))
	byName := make(map[string]meta.GroupResource, len(byGR))
	for gr := range byGR {
		name := crdName(gr)
		names = append(names, name)
		byName[name] = gr
	}
	sort.Strings(names)
	out := make([]registry.Object, 0, len(names))
	for _, name := range names {
		if !labels.Matches(nil) || !fields.Matches(func(f string) (string, bool) {
			switch f {
			case "metadata.name":
				return name, true
			case "metadata.namespace":
				return "", true
			}
			return "", false
		}) {
			continue
		}
		gr := byName[name]
		obj, err := renderCRD(byGR[gr])
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// crdName is the name of the CRD of gr: <plural>.<group>.
func crdName(gr meta.GroupResource) string { return gr.Resource + "." + gr.Group }

// crdUID is a stable uid for the CRD named name (a name-based UUID, the
// same on every server and after restarts).
func crdUID(name string) string {
	sum := sha256.Sum256([]byte("kapi/" + crdResource.String() + "/" + name))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50 // version 5 (name-based)
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// renderCRD renders the CRD of one custom group/resource.
func renderCRD(ct *crdType) (registry.Object, error) {
	st, since := ct.versions[0], ct.since
	name := crdName(st.GroupResource())
	names := crdNames{Plural: st.Resource, Singular: st.Singular, ShortNames: st.ShortNames, Kind: st.Kind,
		ListKind: st.ListKind, Categories: st.Categories}
	crd := customResourceDefinition{
		TypeMeta: meta.TypeMeta{Kind: "CustomResourceDefinition", APIVersion: "apiextensions.k8s.io/v1"},
		Metadata: meta.ObjectMeta{Name: name, UID: crdUID(name)},
		Spec:     crdSpec{Group: st.Group, Names: names, Scope: "Cluster", Conversion: crdConversion{Strategy: "None"}},
		Status:   crdStatus{AcceptedNames: names, StoredVersions: ct.storedVersions},
	}
	if ct.converted {
		// Converted by the host's code, in its process; a CRD says so as a
		// webhook conversion (kapi has no webhook to name).
		crd.Spec.Conversion = crdConversion{Strategy: "Webhook", Webhook: &crdWebhookConversion{ConversionReviewVersions: []string{"v1"}}}
	}
	var created *meta.Time
	if !since.IsZero() {
		created = meta.NewTime(since)
		crd.Metadata.CreationTimestamp = created
	}
	if st.Namespaced {
		crd.Spec.Scope = "Namespaced"
	}
	for _, r := range ct.versions {
		schemaJSON, err := crdSchema(r.Schema)
		if err != nil {
			return nil, meta.NewInternalError(fmt.Errorf("encoding the schema of %s/%s: %w", r.GroupResource(), r.Version, err))
		}
		cv := crdVersion{Name: r.Version, Served: !r.Unserved, Storage: r.Version == ct.storage, Schema: &crdValidation{OpenAPIV3Schema: schemaJSON}}
		if r.Deprecated {
			cv.Deprecated, cv.DeprecationWarning = true, &r.DeprecationWarning
		}
		if sr := r.Subresources; sr.Status || sr.Scale != nil {
			cv.Subresources = &crdSubresources{}
			if sr.Status {
				cv.Subresources.Status = &struct{}{}
			}
			if sc := sr.Scale; sc != nil {
				cv.Subresources.Scale = &crdScale{SpecReplicasPath: sc.SpecReplicasPath,
					StatusReplicasPath: sc.StatusReplicasPath, LabelSelectorPath: sc.LabelSelectorPath}
			}
		}
		for _, c := range r.PrinterColumns {
			if c.Value != nil {
				continue // computed in Go: not expressible as a JSON path
			}
			cv.AdditionalPrinterColumns = append(cv.AdditionalPrinterColumns, crdPrinterCol{Name: c.Name, Type: c.Type,
				Format: c.Format, Description: c.Description, Priority: c.Priority, JSONPath: c.JSONPath})
		}
		for _, f := range r.SelectableFields {
			cv.SelectableFields = append(cv.SelectableFields, crdSelectableFd{JSONPath: f})
		}
		crd.Spec.Versions = append(crd.Spec.Versions, cv)
	}
	crd.Status.Conditions = []crdCondition{
		{Type: "NamesAccepted", Status: "True", LastTransitionTime: created, Reason: "NoConflicts", Message: "no conflicts found"},
		{Type: "Established", Status: "True", LastTransitionTime: created, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"},
	}
	var out registry.Object
	if err := convertObject(crd, &out); err != nil {
		return nil, meta.NewInternalError(err)
	}
	return out, nil
}

// customResourceDefinitions is the registration of the view.
func (s *Server) customResourceDefinitions() (registry.Resource, error) {
	v := newCRDView(s.reg)
	return registry.ForType[customResourceDefinition](registry.Resource{
		Group: crdResource.Group, Version: "v1", Resource: crdResource.Resource,
		Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList",
		Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"},
		Virtual: &registry.Virtual{Get: v.get, List: v.list},
	})
}

// crdSchema is a type's schema as a CRD's openAPIV3Schema: without the
// names of published subschemas (openapi.DefinitionKey), which a CRD's
// schema cannot carry.
func crdSchema(sch *schema.Schema) ([]byte, error) {
	b, err := json.Marshal(sch)
	if err != nil || !bytes.Contains(b, []byte(openapi.DefinitionKey)) {
		return b, err
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	openapi.StripDefinitionNames(m)
	return json.Marshal(m)
}
