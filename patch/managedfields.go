package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kapi-dev/kapi/codec"
)

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
