package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// metadata returns obj["metadata"] if it is an object.
func metadata(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

// metadataForWrite returns obj["metadata"], replacing an absent or non-object
// value with a new empty object.
func metadataForWrite(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func metaString(obj map[string]any, key string) string {
	s, _ := metadata(obj)[key].(string)
	return s
}

// setMeta stores v under metadata[key], or removes the key when remove is
// true (the setters treat zero values as absent, like omitempty).
func setMeta(obj map[string]any, key string, v any, remove bool) {
	if remove {
		if m := metadata(obj); m != nil {
			delete(m, key)
		}
		return
	}
	metadataForWrite(obj)[key] = v
}

// GetAPIVersion returns obj's apiVersion.
func GetAPIVersion(obj map[string]any) string { s, _ := obj["apiVersion"].(string); return s }

// SetAPIVersion sets obj's apiVersion.
func SetAPIVersion(obj map[string]any, v string) { obj["apiVersion"] = v }

// GetKind returns obj's kind.
func GetKind(obj map[string]any) string { s, _ := obj["kind"].(string); return s }

// SetKind sets obj's kind.
func SetKind(obj map[string]any, v string) { obj["kind"] = v }

// GetName returns metadata.name.
func GetName(obj map[string]any) string { return metaString(obj, "name") }

// SetName sets metadata.name.
func SetName(obj map[string]any, v string) { setMeta(obj, "name", v, v == "") }

// GetGenerateName returns metadata.generateName.
func GetGenerateName(obj map[string]any) string { return metaString(obj, "generateName") }

// SetGenerateName sets metadata.generateName.
func SetGenerateName(obj map[string]any, v string) { setMeta(obj, "generateName", v, v == "") }

// GetNamespace returns metadata.namespace.
func GetNamespace(obj map[string]any) string { return metaString(obj, "namespace") }

// SetNamespace sets metadata.namespace.
func SetNamespace(obj map[string]any, v string) { setMeta(obj, "namespace", v, v == "") }

// GetUID returns metadata.uid.
func GetUID(obj map[string]any) string { return metaString(obj, "uid") }

// SetUID sets metadata.uid.
func SetUID(obj map[string]any, v string) { setMeta(obj, "uid", v, v == "") }

// GetResourceVersion returns metadata.resourceVersion.
func GetResourceVersion(obj map[string]any) string { return metaString(obj, "resourceVersion") }

// SetResourceVersion sets metadata.resourceVersion.
func SetResourceVersion(obj map[string]any, v string) {
	setMeta(obj, "resourceVersion", v, v == "")
}

// GetGeneration returns metadata.generation (0 when absent).
func GetGeneration(obj map[string]any) int64 {
	i, _ := AsInt64(metadata(obj)["generation"])
	return i
}

// SetGeneration sets metadata.generation, stored as a json.Number.
func SetGeneration(obj map[string]any, v int64) {
	setMeta(obj, "generation", json.Number(strconv.FormatInt(v, 10)), v == 0)
}

// GetLabels returns a copy of metadata.labels (nil when absent); entries
// whose value is not a string are skipped.
func GetLabels(obj map[string]any) map[string]string { return metaStringMap(obj, "labels") }

// SetLabels sets metadata.labels (removing the field for an empty map).
func SetLabels(obj map[string]any, labels map[string]string) {
	setMetaStringMap(obj, "labels", labels)
}

// GetAnnotations returns a copy of metadata.annotations (nil when absent).
func GetAnnotations(obj map[string]any) map[string]string {
	return metaStringMap(obj, "annotations")
}

// SetAnnotations sets metadata.annotations (removing the field for an empty
// map).
func SetAnnotations(obj map[string]any, annotations map[string]string) {
	setMetaStringMap(obj, "annotations", annotations)
}

func metaStringMap(obj map[string]any, key string) map[string]string {
	m, ok := metadata(obj)[key].(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func setMetaStringMap(obj map[string]any, key string, v map[string]string) {
	if len(v) == 0 {
		setMeta(obj, key, nil, true)
		return
	}
	m := make(map[string]any, len(v))
	for k, s := range v {
		m[k] = s
	}
	setMeta(obj, key, m, false)
}

// GetFinalizers returns a copy of metadata.finalizers (nil when absent);
// elements that are not strings are skipped.
func GetFinalizers(obj map[string]any) []string {
	s, ok := metadata(obj)["finalizers"].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(s))
	for _, e := range s {
		if str, ok := e.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// SetFinalizers sets metadata.finalizers (removing the field when empty).
func SetFinalizers(obj map[string]any, finalizers []string) {
	if len(finalizers) == 0 {
		setMeta(obj, "finalizers", nil, true)
		return
	}
	s := make([]any, len(finalizers))
	for i, f := range finalizers {
		s[i] = f
	}
	setMeta(obj, "finalizers", s, false)
}

func metaTime(obj map[string]any, key string) *Time {
	s, ok := metadata(obj)[key].(string)
	if !ok {
		return nil
	}
	var t Time
	if err := t.UnmarshalJSON([]byte(strconv.Quote(s))); err != nil || t.IsZero() {
		return nil
	}
	return &t
}

func setMetaTime(obj map[string]any, key string, t *Time) {
	if t == nil || t.IsZero() {
		setMeta(obj, key, nil, true)
		return
	}
	setMeta(obj, key, t.UTC().Format(TimeFormat), false)
}

// GetCreationTimestamp returns metadata.creationTimestamp (nil when absent
// or unparsable).
func GetCreationTimestamp(obj map[string]any) *Time { return metaTime(obj, "creationTimestamp") }

// SetCreationTimestamp sets metadata.creationTimestamp (nil removes it).
func SetCreationTimestamp(obj map[string]any, t *Time) { setMetaTime(obj, "creationTimestamp", t) }

// GetDeletionTimestamp returns metadata.deletionTimestamp (nil when absent
// or unparsable).
func GetDeletionTimestamp(obj map[string]any) *Time { return metaTime(obj, "deletionTimestamp") }

// SetDeletionTimestamp sets metadata.deletionTimestamp (nil removes it).
func SetDeletionTimestamp(obj map[string]any, t *Time) { setMetaTime(obj, "deletionTimestamp", t) }

// GetDeletionGracePeriodSeconds returns metadata.deletionGracePeriodSeconds
// (nil when absent).
func GetDeletionGracePeriodSeconds(obj map[string]any) *int64 {
	i, ok := AsInt64(metadata(obj)["deletionGracePeriodSeconds"])
	if !ok {
		return nil
	}
	return &i
}

// SetDeletionGracePeriodSeconds sets metadata.deletionGracePeriodSeconds
// (nil removes it).
func SetDeletionGracePeriodSeconds(obj map[string]any, v *int64) {
	if v == nil {
		setMeta(obj, "deletionGracePeriodSeconds", nil, true)
		return
	}
	setMeta(obj, "deletionGracePeriodSeconds", json.Number(strconv.FormatInt(*v, 10)), false)
}

// GetOwnerReferences returns metadata.ownerReferences decoded (nil when
// absent or malformed).
func GetOwnerReferences(obj map[string]any) []OwnerReference {
	var refs []OwnerReference
	if !decodeMeta(obj, "ownerReferences", &refs) {
		return nil
	}
	return refs
}

// SetOwnerReferences sets metadata.ownerReferences (removing the field when
// empty).
func SetOwnerReferences(obj map[string]any, refs []OwnerReference) {
	encodeMeta(obj, "ownerReferences", refs, len(refs) == 0)
}

// GetManagedFields returns metadata.managedFields decoded (nil when absent
// or malformed).
func GetManagedFields(obj map[string]any) []ManagedFields {
	var mf []ManagedFields
	if !decodeMeta(obj, "managedFields", &mf) {
		return nil
	}
	return mf
}

// SetManagedFields sets metadata.managedFields (removing the field when
// empty).
func SetManagedFields(obj map[string]any, mf []ManagedFields) {
	encodeMeta(obj, "managedFields", mf, len(mf) == 0)
}

func decodeMeta(obj map[string]any, key string, out any) bool {
	v, ok := metadata(obj)[key]
	if !ok {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, out) == nil
}

func encodeMeta(obj map[string]any, key string, v any, remove bool) {
	if remove {
		setMeta(obj, key, nil, true)
		return
	}
	g, err := toGeneric(v)
	if err != nil {
		// The meta types always encode; keep the typed value rather than lose it.
		g = v
	}
	setMeta(obj, key, g, false)
}

// toGeneric converts any JSON-encodable Go value to the generic form.
func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var g any
	if err := d.Decode(&g); err != nil {
		return nil, err
	}
	return g, nil
}

// GetObjectMeta decodes obj's metadata into an ObjectMeta. An absent
// metadata gives an empty ObjectMeta; metadata of the wrong shape is an
// error.
func GetObjectMeta(obj map[string]any) (*ObjectMeta, error) {
	v, ok := obj["metadata"]
	if !ok || v == nil {
		return &ObjectMeta{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("meta: metadata is of the type %s, expected an object", typeName(v))
	}
	var om ObjectMeta
	if err := FromMap(m, &om); err != nil {
		return nil, err
	}
	return &om, nil
}

// SetObjectMeta replaces obj's metadata with the generic form of om.
func SetObjectMeta(obj map[string]any, om *ObjectMeta) error {
	if om == nil {
		delete(obj, "metadata")
		return nil
	}
	m, err := ToMap(om)
	if err != nil {
		return err
	}
	obj["metadata"] = m
	return nil
}
