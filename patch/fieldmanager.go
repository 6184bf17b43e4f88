package patch

import (
	"sync"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Operations recorded in managedFields.
const (
	OperationApply  = "Apply"
	OperationUpdate = "Update"
)

// Managers kube-apiserver records under fixed names.
const (
	// BeforeFirstApplyManager owns, as an Update, every field an object had
	// when it was first applied to without any managedFields.
	BeforeFirstApplyManager = "before-first-apply"
	// UnknownManager records writes that name no manager.
	UnknownManager = "unknown"
	// ancientChangesManager collects the oldest Update managers beyond
	// MaxUpdateManagers.
	ancientChangesManager = "ancient-changes"
	// currentOperation is the placeholder manager of the write in progress.
	currentOperation = "current-operation"
)

// MaxUpdateManagers is how many Update entries an object keeps, as in
// kube-apiserver; older ones merge into an "ancient-changes" entry.
const MaxUpdateManagers = 10

// LastAppliedAnnotation is the annotation client-side kubectl apply keeps
// its last applied configuration in.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// FieldManager tracks who manages which fields of the objects of one type,
// in metadata.managedFields (the FieldsV1 format), and performs server-side
// apply: it is kube-apiserver's field manager on structured-merge-diff with
// the type's schema (see SMDSchema). A FieldManager is safe for concurrent
// use.
type FieldManager struct {
	gvk        meta.GroupVersionKind
	apiVersion fieldpath.APIVersion
	status     bool // the type has a status subresource
	src        *schema.Schema

	once     sync.Once
	parser   typed.ParseableType
	stripSet *fieldpath.Set
	main     *merge.Updater // writes to the object
	statusU  *merge.Updater // writes to /status
	plain    *merge.Updater // writes to other subresources
	// filters are the reset-field filters of the object and of /status.
	mainFilter, statusFilter fieldpath.Filter
	// versions are all the versions of a type served in several (nil: one
	// version, whose updaters above read every entry as it is).
	versions *versionTable

	stamps meta.Stamps // the time of a create's entry

	// omitEmpty names the top-level fields the store leaves out of an
	// object when empty; typedNoop says SetOmitEmpty was called.
	omitEmpty []string
	typedNoop bool

	// smdOnly turns off the direct computation of a create's fields
	// (createManaged), for the tests that hold it to structured-merge-diff.
	smdOnly bool
}

// NewFieldManager returns the field manager of objects of kind gvk with
// schema s. statusSubresource says the type has a /status subresource: then
// writes to the object do not own .status and writes to /status own only
// .status, as kube-apiserver's reset fields. The schema is converted on first
// use.
func NewFieldManager(s *schema.Schema, gvk meta.GroupVersionKind, statusSubresource bool) *FieldManager {
	return &FieldManager{gvk: gvk, apiVersion: fieldpath.APIVersion(gvk.GroupVersion().String()), status: statusSubresource, src: s}
}

// SetOmitEmpty makes an apply whose configuration differs from the object
// only by values the store leaves out a no-op, as kube-apiserver's applies
// to its built-in types are (they compare typed objects): the metadata
// fields meta.OmitEmpty leaves out, and the named top-level fields when
// null or empty objects. Without it such an apply writes (with a new time
// in the applier's entry), as kube-apiserver's applies to custom resources
// do. Call it before the first use.
func (m *FieldManager) SetOmitEmpty(fields ...string) { m.omitEmpty, m.typedNoop = fields, true }

func (m *FieldManager) init() {
	m.once.Do(func() {
		if m.versions != nil {
			m.parser, _ = m.versions.parser(m.apiVersion)
		} else {
			m.parser = typed.ParseableType{Schema: SMDSchema(m.src), TypeRef: named(rootTypeName)}
		}
		m.stripSet = fieldpath.NewSet(
			fieldpath.MakePathOrDie("apiVersion"),
			fieldpath.MakePathOrDie("kind"),
			fieldpath.MakePathOrDie("metadata"),
		)
		for _, f := range strippedMetaFields {
			m.stripSet.Insert(fieldpath.MakePathOrDie("metadata", f))
		}
		build := func(f fieldpath.Filter) *merge.Updater {
			b := merge.UpdaterBuilder{Converter: sameVersion{}}
			if f != nil {
				b.IgnoreFilter = map[fieldpath.APIVersion]fieldpath.Filter{m.apiVersion: f}
			}
			return b.BuildUpdater()
		}
		if m.status {
			m.mainFilter = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
			m.statusFilter = fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))
			m.main = build(m.mainFilter)
			m.statusU = build(m.statusFilter)
		} else {
			m.main = build(nil)
			m.statusU = m.main
		}
		m.plain = build(nil)
	})
}

func (m *FieldManager) filter(subresource string) fieldpath.Filter {
	switch subresource {
	case "":
		return m.mainFilter
	case "status":
		return m.statusFilter
	}
	return nil
}

func (m *FieldManager) updater(subresource string) *merge.Updater {
	if m.versions != nil {
		return m.versions.updater(m.apiVersion, subresource)
	}
	switch subresource {
	case "":
		return m.main
	case "status":
		return m.statusU
	}
	return m.plain
}

// sameVersion is the version converter of a type served in one version:
// every entry reads the object as it is.
type sameVersion struct{}

func (sameVersion) Convert(obj *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return obj, nil
}

func (sameVersion) IsMissingVersionError(error) bool { return false }

// Update records a write that is not an apply — a create (live is nil), an
// update or a non-apply patch — as an Update by manager ("" records
// "unknown") on the given subresource ("" for the object itself), and sets
// obj's metadata.managedFields. It follows kube-apiserver:
//
//   - managedFields in obj replace the live ones when obj carries a
//     decodable, non-empty list; a list with one empty entry ([{}]) clears
//     them; an empty list, an absent or undecodable one, and any list sent to
//     a subresource keep the live ones;
//   - the fields the write changed move to manager, whose entry keeps its
//     older fields and gets the time now;
//   - an existing object without managedFields stays untracked (its first
//     apply starts tracking it);
//   - at most MaxUpdateManagers Update entries are kept.
//
// On error (an object the schema cannot read) obj is left without
// managedFields, as kube-apiserver does; the write itself may proceed.
func (m *FieldManager) Update(live, obj map[string]any, manager, subresource string, now time.Time) error {
	m.init()
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return nil
	}
	reqMF, hasReq := md["managedFields"]
	delete(md, "managedFields")
	if manager == "" {
		manager = UnknownManager
	}
	// A create with nothing to keep: the direct computation (tried once;
	// the sets below are built only when it declines).
	created := live == nil && subresource == "" && !m.smdOnly
	if created && !hasReq {
		if m.createManaged(obj, md, manager, now) {
			return nil
		}
		created = false
	}
	var ms managedSet
	switch {
	case subresource != "":
		ms = liveManaged(live)
	case hasReq && isResetManagedFields(reqMF):
		ms = newManagedSet()
	case hasReq:
		var err error
		if ms, err = decodeManaged(reqMF); err != nil || len(ms.fields) == 0 {
			ms = liveManaged(live)
		}
	default:
		ms = liveManaged(live)
	}
	if len(ms.fields) == 0 && live != nil {
		return nil
	}
	if created && len(ms.fields) == 0 && m.createManaged(obj, md, manager, now) {
		return nil
	}
	liveTV, err := m.comparableObject(live)
	if err != nil {
		return err
	}
	newTV, err := m.comparableObject(obj)
	if err != nil {
		return err
	}
	id := managerID{Manager: manager, Operation: OperationUpdate, APIVersion: string(m.apiVersion), Subresource: subresource}.String()
	if err := m.recordUpdate(m.updater(subresource), liveTV, newTV, &ms, id, now); err != nil {
		return err
	}
	return m.encodeInto(obj, ms)
}

// recordUpdate moves the fields that differ between liveTV and newTV to
// manager id (an Update).
func (m *FieldManager) recordUpdate(u *merge.Updater, liveTV, newTV *typed.TypedValue, ms *managedSet, id string, now time.Time) error {
	_, fields, err := u.Update(liveTV, newTV, m.apiVersion, ms.fields, currentOperation)
	if err != nil {
		return err
	}
	ms.fields = fields
	if vs, ok := fields[currentOperation]; ok {
		delete(fields, currentOperation)
		set := vs.Set().Difference(m.stripSet)
		if !set.Empty() {
			if prev, ok := fields[id]; ok {
				set = set.Union(prev.Set())
			}
			fields[id] = fieldpath.NewVersionedSet(set, vs.APIVersion(), false)
			ms.times[id] = now
		}
	}
	capUpdateManagers(ms)
	return nil
}

// typedObject reads obj (nil: an empty object) with the schema, without its
// managedFields. Apply configurations are read strictly (no duplicate set or
// map list entries); stored objects leniently.
func (m *FieldManager) typedObject(obj map[string]any, lenient bool) (*typed.TypedValue, error) {
	v, err := toSMD(copyWithoutManagedFields(obj))
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	var opts []typed.ValidationOptions
	if lenient {
		opts = append(opts, typed.AllowDuplicates)
	}
	return typed.AsTyped(newOrderedValue(v), m.parser.Schema, m.parser.TypeRef, opts...)
}

// comparableObject is typedObject(obj, true) with the associative lists
// sorted (see sortAssociative): for comparisons, whose result does not
// depend on their order.
func (m *FieldManager) comparableObject(obj map[string]any) (*typed.TypedValue, error) {
	v, err := toSMD(copyWithoutManagedFields(obj))
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	w := fieldsWalker{s: m.parser.Schema}
	w.sortAssociative(v, m.parser.TypeRef)
	return typed.AsTyped(newOrderedValue(v), m.parser.Schema, m.parser.TypeRef, typed.AllowDuplicates)
}

// copyWithoutManagedFields returns obj with metadata.managedFields left out,
// sharing everything else.
func copyWithoutManagedFields(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	if _, has := md["managedFields"]; !has {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	m := make(map[string]any, len(md))
	for k, v := range md {
		if k != "managedFields" {
			m[k] = v
		}
	}
	out["metadata"] = m
	return out
}
