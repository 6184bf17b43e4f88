package patch

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

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
	if err := m.checkApply(live, config, opts); err != nil {
		return nil, err
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
	newTV, fields, err := m.mergeConfig(u, live, liveTV, cfgTV, ms, id, opts)
	if err != nil {
		return nil, err
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

// checkApply refuses a configuration Apply cannot take: another kind or
// version, managedFields set, no manager, type errors, or lists too far out
// of order (in config and live together) for structured-merge-diff.
func (m *FieldManager) checkApply(live, config map[string]any, opts ApplyOptions) error {
	av, _ := config["apiVersion"].(string)
	kind, _ := config["kind"].(string)
	if av != m.gvk.GroupVersion().String() || kind != m.gvk.Kind {
		return badRequest("invalid object type: %s, Kind=%s: this endpoint serves %s, Kind=%s", av, kind, m.gvk.GroupVersion(), m.gvk.Kind)
	}
	if md, ok := config["metadata"].(map[string]any); ok && md["managedFields"] != nil {
		return badRequest("metadata.managedFields must be nil")
	}
	if opts.Manager == "" {
		return badRequest("fieldManager is required for apply")
	}
	if errs := m.typeCheck(config); len(errs) > 0 {
		return &Error{Code: http.StatusUnprocessableEntity, Message: errs.ToAggregate().Error(), Fields: errs}
	}
	w := fieldsWalker{s: m.parser.Schema}
	if d := w.disorder(config, m.parser.TypeRef, MaxApplyDisorder); d > MaxApplyDisorder || w.disorder(live, m.parser.TypeRef, MaxApplyDisorder-d) > MaxApplyDisorder-d {
		return tooLarge("the lists of the applied configuration and of the object are too far out of order for server-side apply (more than %d pairs of entries out of order); apply them sorted, or use another kind of patch", MaxApplyDisorder)
	}
	return nil
}

// mergeConfig applies cfgTV to liveTV as manager id with u, returning the merged
// object and managed fields, or the 409 of the conflicts. A "kubectl" apply
// takes over, unforced, the conflicting fields its client-side last-applied
// annotation set and nobody changed since.
func (m *FieldManager) mergeConfig(u *merge.Updater, live map[string]any, liveTV, cfgTV *typed.TypedValue, ms managedSet, id string, opts ApplyOptions) (*typed.TypedValue, fieldpath.ManagedFields, error) {
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
			return nil, nil, conflictError(conflicts)
		}
		return nil, nil, fmt.Errorf("applying: %w", err)
	}
	return newTV, fields, nil
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
	cfg, _ := cfgTV.AsValue().Unstructured().(map[string]any)
	if live, ok := liveTV.AsValue().Unstructured().(map[string]any); ok && cfg != nil && surelyChanges(cfg, live) {
		return false
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
	if value.Equals(merged.AsValue(), liveTV.AsValue()) {
		return true
	}
	// A typed type's store leaves empty values out (meta.OmitEmpty): a
	// configuration that sets labels: {} leaves an object without labels
	// as it is.
	if !m.typedNoop || !meta.HasOmittable(cfg, m.omitEmpty...) {
		return false
	}
	u, ok := merged.AsValue().Unstructured().(map[string]any)
	if !ok {
		return false
	}
	u = maps.Clone(u) // the merged object may share its maps with live's
	if md, ok := u["metadata"].(map[string]any); ok {
		u["metadata"] = maps.Clone(md)
	}
	meta.OmitEmpty(u, m.omitEmpty...)
	return value.Equals(value.NewValueInterface(u), liveTV.AsValue())
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
