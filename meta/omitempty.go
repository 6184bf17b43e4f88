package meta

// OmitEmpty drops from obj what kube-apiserver never stores because it
// decodes objects into Go structs whose fields are omitempty: in metadata
// (every type, custom resources too), labels, annotations, finalizers and
// ownerReferences that are null or empty and a null or empty generateName;
// at the top level, the named fields when null or empty objects (a
// built-in type's maps, such as a ConfigMap's data).
func OmitEmpty(obj map[string]any, fields ...string) { omitEmpty(obj, fields, true) }

// HasOmittable reports whether OmitEmpty(obj, fields...) would leave
// something out.
func HasOmittable(obj map[string]any, fields ...string) bool { return omitEmpty(obj, fields, false) }

// omitEmpty reports whether obj holds values OmitEmpty leaves out and, with
// drop, leaves them out.
func omitEmpty(obj map[string]any, fields []string, drop bool) bool {
	found := false
	if md, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range md {
			if omittedFromMetadata(k, v) {
				if found = true; !drop {
					return true
				}
				delete(md, k)
			}
		}
	}
	for _, f := range fields {
		if v, ok := obj[f]; ok && emptyMap(v) {
			if found = true; !drop {
				return true
			}
			delete(obj, f)
		}
	}
	return found
}

// omittedFromMetadata reports whether metadata field k, holding v, is
// left out. A value of the wrong type stays, for validation to refuse.
func omittedFromMetadata(k string, v any) bool {
	switch k {
	case "labels", "annotations":
		return emptyMap(v)
	case "finalizers", "ownerReferences":
		switch l := v.(type) {
		case nil:
			return true
		case []any:
			return len(l) == 0
		case []string:
			return len(l) == 0
		}
	case "generateName":
		return v == nil || v == ""
	}
	return false
}

// emptyMap reports whether v is null or an object without members.
func emptyMap(v any) bool {
	switch m := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(m) == 0
	case map[string]string:
		return len(m) == 0
	}
	return false
}
