package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kapi-dev/kapi/codec"
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

	stamps meta.Stamps // the time of a create's entry

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

func (m *FieldManager) init() {
	m.once.Do(func() {
		sch := SMDSchema(m.src)
		name := rootTypeName
		m.parser = typed.ParseableType{Schema: sch, TypeRef: named(name)}
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
	switch subresource {
	case "":
		return m.main
	case "status":
		return m.statusU
	}
	return m.plain
}

// sameVersion is the version converter: kapi serves one schema per
// registration, so every version reads the object as it is.
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

// ApplyOptions are the parameters of an apply.
type ApplyOptions struct {
	// Manager is the fieldManager of the request (required).
	Manager string
	// Force takes ownership of conflicting fields instead of failing.
	Force bool
	// Subresource is "" for the object, or e.g. "status".
	Subresource string
	// Now is the time recorded for the manager.
	Now time.Time
}

// Apply merges the applied configuration config into live (nil when the
// object does not exist yet) and returns the resulting object with its
// managedFields; neither argument is modified. The result is a copy of live
// (with updated managedFields) when the configuration changes no value.
//
// config must be an object of this kind and version without managedFields
// (400 Error otherwise); values of the wrong type, and duplicate entries in
// set and map lists, are a 422 Error naming the fields. A configuration that
// changes fields other managers own fails with a 409 *meta.StatusError
// listing each conflicting field and manager, unless opts.Force is set. As in
// kube-apiserver, an object without managedFields first gets a
// "before-first-apply" Update entry owning all its fields, and an apply by
// "kubectl" keeps the client-side last-applied annotation in step and may
// take over fields that annotation says kubectl set.
func (m *FieldManager) Apply(live, config map[string]any, opts ApplyOptions) (map[string]any, error) {
	m.init()
	av, _ := config["apiVersion"].(string)
	kind, _ := config["kind"].(string)
	if av != m.gvk.GroupVersion().String() || kind != m.gvk.Kind {
		return nil, badRequest("invalid object type: %s, Kind=%s: this endpoint serves %s, Kind=%s", av, kind, m.gvk.GroupVersion(), m.gvk.Kind)
	}
	if md, ok := config["metadata"].(map[string]any); ok && md["managedFields"] != nil {
		return nil, badRequest("metadata.managedFields must be nil")
	}
	if opts.Manager == "" {
		return nil, badRequest("fieldManager is required for apply")
	}
	if errs := m.typeCheck(config); len(errs) > 0 {
		return nil, &Error{Code: http.StatusUnprocessableEntity, Message: errs.ToAggregate().Error(), Fields: errs}
	}
	w := fieldsWalker{s: m.parser.Schema}
	if d := w.disorder(config, m.parser.TypeRef, MaxApplyDisorder); d > MaxApplyDisorder || w.disorder(live, m.parser.TypeRef, MaxApplyDisorder-d) > MaxApplyDisorder-d {
		return nil, tooLarge("the lists of the applied configuration and of the object are too far out of order for server-side apply (more than %d pairs of entries out of order); apply them sorted, or use another kind of patch", MaxApplyDisorder)
	}
	cfgTV, err := m.typedObject(config, false)
	if err != nil {
		return nil, invalid("the applied configuration does not match the schema: %v", err)
	}
	ms := liveManaged(live)
	liveTV, err := m.typedObject(live, true)
	if err != nil {
		return nil, fmt.Errorf("reading the current object: %w", err)
	}
	u := m.updater(opts.Subresource)
	if len(ms.fields) == 0 && live != nil {
		emptyTV, _ := m.typedObject(nil, true)
		id := managerID{Manager: BeforeFirstApplyManager, Operation: OperationUpdate, APIVersion: string(m.apiVersion), Subresource: opts.Subresource}.String()
		if err := m.recordUpdate(u, emptyTV, liveTV, &ms, id, opts.Now); err != nil {
			return nil, err
		}
	}
	id := managerID{Manager: opts.Manager, Operation: OperationApply, Subresource: opts.Subresource}.String()
	if m.isNoop(liveTV, cfgTV, ms, id, opts.Subresource) {
		// The common re-apply of an unchanged configuration: nothing to
		// merge, prune or move.
		out := resultOf(live)
		if err := m.encodeInto(out, ms); err != nil {
			return nil, err
		}
		return out, nil
	}
	newTV, fields, err := u.Apply(liveTV, cfgTV, m.apiVersion, ms.fields, id, opts.Force)
	var conflicts merge.Conflicts
	if errors.As(err, &conflicts) && opts.Manager == "kubectl" {
		// Fields client-side kubectl apply set, and nobody changed since,
		// are kubectl's to take over.
		if allowed := m.lastAppliedFields(live, liveTV); allowed != nil {
			var rest merge.Conflicts
			for _, c := range conflicts {
				if !allowed.Has(c.Path) {
					rest = append(rest, c)
				}
			}
			if len(rest) == 0 {
				newTV, fields, err = u.Apply(liveTV, cfgTV, m.apiVersion, ms.fields, id, true)
			} else {
				conflicts = rest
			}
		}
	}
	if err != nil {
		if errors.As(err, new(merge.Conflicts)) {
			return nil, conflictError(conflicts)
		}
		return nil, fmt.Errorf("applying: %w", err)
	}
	ms.fields = fields
	if vs, ok := fields[id]; ok {
		if set := vs.Set().Difference(m.stripSet); set.Empty() {
			delete(fields, id)
		} else {
			fields[id] = fieldpath.NewVersionedSet(set, vs.APIVersion(), true)
		}
	}
	var out map[string]any
	if newTV != nil {
		ms.times[id] = opts.Now
		u, ok := newTV.AsValue().Unstructured().(map[string]any)
		if !ok {
			return nil, errors.New("applying: the merged object is not an object")
		}
		out = fromSMD(u).(map[string]any)
	} else {
		out = resultOf(live)
	}
	if opts.Manager == "kubectl" && lastApplied(live) != "" {
		if err := setLastApplied(out, config); err != nil {
			return nil, err
		}
	}
	if err := m.encodeInto(out, ms); err != nil {
		return nil, err
	}
	return out, nil
}

// isNoop reports whether applying cfgTV leaves both the object and the
// applier's fields as they are: the applier applied exactly these fields last
// time, and their values are all in place. Such an apply can neither conflict
// nor prune anything.
func (m *FieldManager) isNoop(liveTV, cfgTV *typed.TypedValue, ms managedSet, id, subresource string) bool {
	prev, ok := ms.fields[id]
	if !ok || !prev.Applied() || prev.APIVersion() != m.apiVersion {
		return false
	}
	// A re-apply that changes a value (the usual one that is not a no-op)
	// is told apart cheaply, without the field set and the merge below.
	if cfg, ok := cfgTV.AsValue().Unstructured().(map[string]any); ok {
		if live, ok := liveTV.AsValue().Unstructured().(map[string]any); ok && surelyChanges(cfg, live) {
			return false
		}
	}
	set, err := cfgTV.ToFieldSet()
	if err != nil {
		return false
	}
	if f := m.filter(subresource); f != nil {
		set = f.Filter(set)
	}
	if !set.Difference(m.stripSet).Equals(prev.Set()) {
		return false
	}
	merged, err := liveTV.Merge(cfgTV)
	if err != nil {
		return false
	}
	return value.Equals(merged.AsValue(), liveTV.AsValue())
}

// surelyChanges reports whether merging cfg into live surely changes live:
// cfg sets a string, boolean or number, reached through objects only, that
// live lacks or holds with another value (a number only against one of the
// same Go type). Lists, nulls and objects live lacks are not looked into,
// so false means "maybe not". A merge takes the configuration's scalars, so
// where this reports true the merged object differs from live.
func surelyChanges(cfg, live map[string]any) bool {
	for k, cv := range cfg {
		lv, inLive := live[k]
		switch c := cv.(type) {
		case map[string]any:
			if l, ok := lv.(map[string]any); ok && surelyChanges(c, l) {
				return true
			}
		case string, bool:
			if lv != cv { // live lacks it, or holds another type or value
				return true
			}
		case int64:
			if !inLive {
				return true
			}
			if l, ok := lv.(int64); ok && l != c {
				return true
			}
		case float64:
			if !inLive {
				return true
			}
			if l, ok := lv.(float64); ok && l != c {
				return true
			}
		}
	}
	return false
}

// lastAppliedFields returns the fields kubectl's client-side last-applied
// annotation of live sets to their current values, or nil.
func (m *FieldManager) lastAppliedFields(live map[string]any, liveTV *typed.TypedValue) *fieldpath.Set {
	la := lastApplied(live)
	if la == "" {
		return nil
	}
	var obj map[string]any
	d := json.NewDecoder(strings.NewReader(la))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		return nil
	}
	if av, _ := obj["apiVersion"].(string); av != string(m.apiVersion) {
		return nil
	}
	laTV, err := m.typedObject(obj, false)
	if err != nil {
		return nil
	}
	set, err := laTV.ToFieldSet()
	if err != nil {
		return nil
	}
	cmp, err := laTV.Compare(liveTV)
	if err != nil {
		return nil
	}
	return set.Difference(cmp.Modified).Difference(cmp.Added).Difference(cmp.Removed)
}

func lastApplied(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[LastAppliedAnnotation].(string)
	return s
}

// setLastApplied stores config (without the annotation itself) as obj's
// last-applied annotation.
func setLastApplied(obj, config map[string]any) error {
	c := meta.DeepCopyMap(config)
	if md, ok := c["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, LastAppliedAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	// A fresh annotations map: obj may share the live object's.
	old, _ := md["annotations"].(map[string]any)
	ann := make(map[string]any, len(old)+1)
	for k, v := range old {
		ann[k] = v
	}
	ann[LastAppliedAnnotation] = string(b) + "\n"
	md["annotations"] = ann
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

// resultOf returns a copy of live, for an apply that changes no value, that
// the caller may set managedFields and annotations on: the object and its
// metadata are copied, the rest is shared.
func resultOf(live map[string]any) map[string]any {
	out := make(map[string]any, len(live)+1)
	for k, v := range live {
		out[k] = v
	}
	if md, ok := live["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if k != "managedFields" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
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

// typeCheck returns the type errors and duplicate set or map list entries of
// an apply configuration, as schema validation words them (other schema
// rules apply to the merged object).
func (m *FieldManager) typeCheck(config map[string]any) meta.ErrorList {
	body := make(map[string]any, len(config))
	for k, v := range config {
		if k != "metadata" {
			body[k] = v
		}
	}
	var out meta.ErrorList
	for _, e := range schema.Validate(body, m.src) {
		switch {
		case e.Type == meta.CauseTypeTypeInvalid && e.BadValue != "null",
			e.Type == meta.CauseTypeFieldValueDuplicate:
			out = append(out, e)
		}
	}
	return out
}

// managedSet is decoded managedFields: the field sets by manager identifier,
// and the time of each entry.
type managedSet struct {
	fields fieldpath.ManagedFields
	times  map[string]time.Time
}

func newManagedSet() managedSet {
	return managedSet{fields: fieldpath.ManagedFields{}, times: map[string]time.Time{}}
}

// liveManaged decodes the managedFields of the stored object (empty when it
// has none or they cannot be decoded).
func liveManaged(live map[string]any) managedSet {
	md, _ := live["metadata"].(map[string]any)
	if v, ok := md["managedFields"]; ok {
		if ms, err := decodeManaged(v); err == nil {
			return ms
		}
	}
	return newManagedSet()
}

// isResetManagedFields reports a managedFields value of one empty entry
// ([{}]), which clears an object's managedFields.
func isResetManagedFields(v any) bool {
	l, ok := v.([]any)
	if !ok || len(l) != 1 {
		return false
	}
	e, ok := l[0].(map[string]any)
	return ok && len(e) == 0
}

// managerID identifies a manager entry, as kube-apiserver keys them: the
// manager, operation, apiVersion (Update entries only) and subresource.
type managerID struct {
	Manager     string `json:"manager,omitempty"`
	Operation   string `json:"operation,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// String is id as encoding/json marshals it (the fields in order, empty
// ones left out), written directly: it is taken for every manager of every
// apply and update.
func (id managerID) String() string {
	b := make([]byte, 0, 32+len(id.Manager)+len(id.Operation)+len(id.APIVersion)+len(id.Subresource))
	b = append(b, '{')
	for _, f := range [...]struct{ key, value string }{
		{`"manager":`, id.Manager}, {`"operation":`, id.Operation},
		{`"apiVersion":`, id.APIVersion}, {`"subresource":`, id.Subresource},
	} {
		if f.value == "" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = codec.AppendJSONString(append(b, f.key...), f.value)
	}
	return string(append(b, '}'))
}

// parseManagerID reads back what String wrote (a zero managerID for
// anything that is not a JSON object). It runs for every manager of every
// update and apply: an id without escapes, the usual one, is read directly,
// others with kapi's JSON decoder.
func parseManagerID(s string) managerID {
	if strings.IndexByte(s, '\\') < 0 {
		if id, ok := parsePlainManagerID(s); ok {
			return id
		}
	}
	v, _, err := codec.DecodeJSON([]byte(s))
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return managerID{}
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	return managerID{Manager: str("manager"), Operation: str("operation"), APIVersion: str("apiVersion"), Subresource: str("subresource")}
}

// parsePlainManagerID reads {"key":"value",...} with no escapes and no
// spaces, the form String writes; ok is false for anything else.
func parsePlainManagerID(s string) (id managerID, ok bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return managerID{}, false
	}
	rest := s[1 : len(s)-1]
	for rest != "" {
		var key, value string
		if key, rest, ok = plainJSONString(rest); !ok || rest == "" || rest[0] != ':' {
			return managerID{}, false
		}
		if value, rest, ok = plainJSONString(rest[1:]); !ok {
			return managerID{}, false
		}
		switch key {
		case "manager":
			id.Manager = value
		case "operation":
			id.Operation = value
		case "apiVersion":
			id.APIVersion = value
		case "subresource":
			id.Subresource = value
		default:
			return managerID{}, false
		}
		if rest != "" {
			if rest[0] != ',' || len(rest) == 1 {
				return managerID{}, false
			}
			rest = rest[1:]
		}
	}
	return id, true
}

// plainJSONString reads a JSON string without escapes at the start of s.
func plainJSONString(s string) (value, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", s, false
	}
	value = s[1 : 1+end]
	for i := 0; i < len(value); i++ {
		if value[i] < 0x20 {
			return "", s, false
		}
	}
	if !utf8.ValidString(value) {
		return "", s, false
	}
	return value, s[2+end:], true
}

// appendFieldsJSON appends a decoded fieldsV1 value as JSON: objects of
// objects, the form every fieldsV1 has, or the JSON text a create leaves in
// place (decoded first). The members of each object are written in
// fieldpath's order of their path elements: fieldpath.Set.FromJSON appends
// members that come in that order and inserts the others one by one, which
// is quadratic in their number. Anything else is written by encoding/json,
// for fieldpath to refuse or accept.
func appendFieldsJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		var d any
		if err := json.Unmarshal(v, &d); err != nil {
			return dst, err
		}
		return appendFieldsJSON(dst, d)
	case map[string]any:
		type member struct {
			key string
			pe  fieldpath.PathElement
			ok  bool // pe is a path element fieldpath reads
		}
		ms := make([]member, 0, len(v))
		for k := range v {
			pe, err := fieldpath.DeserializePathElement(k)
			ms = append(ms, member{key: k, pe: pe, ok: err == nil})
		}
		// Keys fieldpath skips or refuses go first; the others in order.
		slices.SortFunc(ms, func(a, b member) int {
			switch {
			case a.ok != b.ok:
				if a.ok {
					return 1
				}
				return -1
			case !a.ok:
				return strings.Compare(a.key, b.key)
			}
			if c := a.pe.Compare(b.pe); c != 0 {
				return c
			}
			return strings.Compare(a.key, b.key)
		})
		dst = append(dst, '{')
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendFieldsJSON(append(codec.AppendJSONString(dst, m.key), ':'), v[m.key]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// decodeManaged decodes a metadata.managedFields value.
func decodeManaged(v any) (managedSet, error) {
	ms := newManagedSet()
	list, ok := v.([]any)
	if !ok {
		if v == nil {
			return ms, nil
		}
		return ms, errors.New("managedFields must be a list")
	}
	for i, e := range list {
		entry, ok := e.(map[string]any)
		if !ok {
			return ms, fmt.Errorf("managedFields[%d] is not an object", i)
		}
		str := func(k string) string { s, _ := entry[k].(string); return s }
		op := str("operation")
		if op != OperationApply && op != OperationUpdate {
			return ms, fmt.Errorf("managedFields[%d]: operation must be `Apply` or `Update`", i)
		}
		if str("apiVersion") == "" {
			return ms, fmt.Errorf("managedFields[%d]: apiVersion must not be empty", i)
		}
		if str("fieldsType") != "FieldsV1" {
			return ms, fmt.Errorf("managedFields[%d]: fieldsType must be FieldsV1", i)
		}
		id := managerID{Manager: str("manager"), Operation: op, Subresource: str("subresource")}
		if op == OperationUpdate {
			id.APIVersion = str("apiVersion")
		}
		set := &fieldpath.Set{}
		if fv, ok := entry["fieldsV1"]; ok && fv != nil {
			b, err := appendFieldsJSON(nil, fv)
			if err != nil {
				return ms, fmt.Errorf("managedFields[%d].fieldsV1: %v", i, err)
			}
			if err := set.FromJSON(bytes.NewReader(b)); err != nil {
				return ms, fmt.Errorf("managedFields[%d].fieldsV1: %v", i, err)
			}
		}
		key := id.String()
		ms.fields[key] = fieldpath.NewVersionedSet(set, fieldpath.APIVersion(str("apiVersion")), op == OperationApply)
		if t, err := time.Parse(time.RFC3339, str("time")); err == nil {
			ms.times[key] = t
		} else {
			delete(ms.times, key)
		}
	}
	return ms, nil
}

// encodeInto sets obj's metadata.managedFields from ms (removing it when
// empty), entries ordered as kube-apiserver orders them: by operation, time,
// manager, apiVersion and subresource.
func (m *FieldManager) encodeInto(obj map[string]any, ms managedSet) error {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if len(ms.fields) == 0 {
		delete(md, "managedFields")
		return nil
	}
	type entry struct {
		id   managerID
		time time.Time
		v    map[string]any
	}
	entries := make([]entry, 0, len(ms.fields))
	for key, vs := range ms.fields {
		id := parseManagerID(key)
		id.APIVersion = string(vs.APIVersion())
		if vs.Applied() {
			id.Operation = OperationApply
		}
		fv, err := fieldsV1Object(vs.Set())
		if err != nil {
			return err
		}
		e := map[string]any{
			"manager":    id.Manager,
			"operation":  id.Operation,
			"apiVersion": id.APIVersion,
			"fieldsType": "FieldsV1",
			"fieldsV1":   fv,
		}
		if id.Subresource != "" {
			e["subresource"] = id.Subresource
		}
		t, hasTime := ms.times[key]
		if hasTime {
			e["time"] = t.UTC().Truncate(time.Second).Format(time.RFC3339)
		}
		entries = append(entries, entry{id: id, time: t, v: e})
	}
	sort.Slice(entries, func(i, j int) bool {
		p, q := entries[i], entries[j]
		if p.id.Operation != q.id.Operation {
			return p.id.Operation < q.id.Operation
		}
		if ps, qs := unixOrZero(p.time), unixOrZero(q.time); ps != qs {
			return ps < qs
		}
		if p.id.Manager != q.id.Manager {
			return p.id.Manager < q.id.Manager
		}
		if p.id.APIVersion != q.id.APIVersion {
			return p.id.APIVersion < q.id.APIVersion
		}
		return p.id.Subresource < q.id.Subresource
	})
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e.v
	}
	md["managedFields"] = list
	return nil
}

// fieldsV1Object is the FieldsV1 form of s as a decoded JSON object, the
// same as decoding s.ToJSON() but without the round trip through bytes: each
// member is a key with an empty object, each path with children an object
// of them, holding "." when the path is a member too.
func fieldsV1Object(s *fieldpath.Set) (map[string]any, error) {
	out := make(map[string]any, s.Members.Size())
	var err error
	s.Members.Iterate(func(pe fieldpath.PathElement) {
		if err != nil {
			return
		}
		var k string
		if k, err = fieldpath.SerializePathElement(pe); err == nil {
			out[k] = map[string]any{}
		}
	})
	s.Children.Iterate(func(pe fieldpath.PathElement) {
		if err != nil {
			return
		}
		var k string
		if k, err = fieldpath.SerializePathElement(pe); err != nil {
			return
		}
		var child map[string]any
		if child, err = fieldsV1Object(s.Children.Descend(pe)); err != nil {
			return
		}
		if _, member := out[k]; member {
			child["."] = map[string]any{}
		}
		out[k] = child
	})
	return out, err
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// capUpdateManagers merges the oldest Update entries into "ancient-changes"
// entries (one per apiVersion) until at most MaxUpdateManagers are left.
func capUpdateManagers(ms *managedSet) {
	var updaters []string
	for k, vs := range ms.fields {
		if !vs.Applied() {
			updaters = append(updaters, k)
		}
	}
	if len(updaters) <= MaxUpdateManagers {
		return
	}
	sort.Slice(updaters, func(i, j int) bool {
		ti, tj := unixOrZero(ms.times[updaters[i]]), unixOrZero(ms.times[updaters[j]])
		if ti != tj {
			return ti < tj
		}
		return updaters[i] < updaters[j]
	})
	first := map[fieldpath.APIVersion]string{}
	for i, n := 0, len(updaters); i < len(updaters) && n > MaxUpdateManagers; i++ {
		k := updaters[i]
		vs := ms.fields[k]
		version := vs.APIVersion()
		bucket := managerID{Manager: ancientChangesManager, Operation: OperationUpdate, APIVersion: string(version)}.String()
		f, ok := first[version]
		if !ok {
			first[version] = k
			continue
		}
		if _, ok := ms.fields[bucket]; !ok {
			ms.fields[bucket] = ms.fields[f]
			delete(ms.fields, f)
		}
		ms.fields[bucket] = fieldpath.NewVersionedSet(vs.Set().Union(ms.fields[bucket].Set()), version, false)
		delete(ms.fields, k)
		n--
		if t, ok := ms.times[k]; ok {
			ms.times[bucket] = t
		} else {
			delete(ms.times, bucket)
		}
	}
}

// conflictError is the 409 kube-apiserver answers for apply conflicts: one
// cause per conflicting field, naming its manager.
func conflictError(cs merge.Conflicts) *meta.StatusError {
	sorted := make(merge.Conflicts, len(cs))
	copy(sorted, cs)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Manager != sorted[j].Manager {
			return sorted[i].Manager < sorted[j].Manager
		}
		return sorted[i].Path.Compare(sorted[j].Path) < 0
	})
	causes := make([]meta.StatusCause, 0, len(sorted))
	for _, c := range sorted {
		causes = append(causes, meta.StatusCause{
			Type:    meta.CauseTypeFieldManagerConflict,
			Message: "conflict with " + printManager(c.Manager),
			Field:   c.Path.String(),
		})
	}
	var msg string
	if len(sorted) == 1 {
		msg = fmt.Sprintf("Apply failed with 1 conflict: conflict with %s: %v", printManager(sorted[0].Manager), sorted[0].Path)
	} else {
		var lines []string
		last := ""
		for _, c := range sorted {
			if c.Manager != last {
				lines = append(lines, fmt.Sprintf("conflicts with %s:", printManager(c.Manager)))
				last = c.Manager
			}
			lines = append(lines, fmt.Sprintf("- %v", c.Path))
		}
		msg = fmt.Sprintf("Apply failed with %d conflicts: %s", len(sorted), strings.Join(lines, "\n"))
	}
	return &meta.StatusError{Status: meta.Status{
		TypeMeta: meta.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   meta.StatusFailure,
		Message:  msg,
		Reason:   meta.StatusReasonConflict,
		Code:     http.StatusConflict,
		Details:  &meta.StatusDetails{Causes: causes},
	}}
}

// printManager renders a manager identifier as kube-apiserver does in
// conflicts: "kubectl", "ctrl" using v1, "m" with subresource "status".
func printManager(key string) string {
	id := parseManagerID(key)
	if id.Manager == "" && id.Operation == "" {
		return fmt.Sprintf("%q", key)
	}
	s := fmt.Sprintf("%q", id.Manager)
	if id.Subresource != "" {
		s = fmt.Sprintf("%s with subresource %q", s, id.Subresource)
	}
	if id.Operation == OperationUpdate {
		s = fmt.Sprintf("%s using %s", s, id.APIVersion)
	}
	return s
}
