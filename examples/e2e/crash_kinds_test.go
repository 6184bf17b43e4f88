package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The resource types of the crash soak (crash_soak_test.go). Every write
// puts a number unique in the whole run into its object (a configmap's
// data, a secret's data, a widget's spec.size, a lease's holder, an event's
// message), so any object read back, listed or watched names the write
// that produced it.

// soakAPI is one group version a type is served at.
type soakAPI struct {
	path       string // "/api/v1", "/apis/example.dev/v2"
	apiVersion string // "v1", "example.dev/v2"
}

// soakKind is one type: its APIs (widgets have two), its collection in
// the soak's namespace, and how a value is written into an object and read
// back from one.
type soakKind struct {
	resource string
	kind     string
	apis     []soakAPI
	// fields are the top-level fields of an object holding val, for a
	// create, an update or a merge patch.
	fields func(val int64) map[string]any
	// value reads the value back from an object.
	value func(obj map[string]any) (int64, error)
	// budgeted types may refuse writes for a while (the event write budget).
	budgeted bool
	watchers []*soakWatcher // one per API; bit i of a write's seen is watchers[i]
}

func (k *soakKind) collection(api soakAPI, ns string) string {
	return api.path + "/namespaces/" + ns + "/" + k.resource
}

// soakKinds are configmaps, secrets (sealed at rest), widgets through
// example.dev/v1 and v2, leases and core events in namespace ns.
func soakKinds(ns string) []*soakKind {
	core := []soakAPI{{"/api/v1", "v1"}}
	return []*soakKind{
		{
			resource: "configmaps", kind: "ConfigMap", apis: core,
			fields: func(v int64) map[string]any {
				return map[string]any{"data": map[string]any{"v": strconv.FormatInt(v, 10)}}
			},
			value: func(o map[string]any) (int64, error) { return parseSoakValue(field(o, "data", "v")) },
		},
		{
			resource: "secrets", kind: "Secret", apis: core,
			fields: func(v int64) map[string]any {
				return map[string]any{"type": "Opaque", "data": map[string]any{"v": base64.StdEncoding.EncodeToString([]byte("secret-" + strconv.FormatInt(v, 10)))}}
			},
			value: func(o map[string]any) (int64, error) {
				b, err := base64.StdEncoding.DecodeString(fmt.Sprint(field(o, "data", "v")))
				if err != nil {
					return 0, fmt.Errorf("secret data.v: %v", err)
				}
				s, ok := strings.CutPrefix(string(b), "secret-")
				if !ok {
					return 0, fmt.Errorf("secret data.v %q", b)
				}
				return parseSoakValue(s)
			},
		},
		{
			resource: "widgets", kind: "Widget",
			apis:   []soakAPI{{"/apis/example.dev/v1", "example.dev/v1"}, {"/apis/example.dev/v2", "example.dev/v2"}},
			fields: func(v int64) map[string]any { return map[string]any{"spec": map[string]any{"size": v}} },
			value: func(o map[string]any) (int64, error) {
				f, ok := field(o, "spec", "size").(float64)
				if !ok {
					return 0, fmt.Errorf("widget spec.size %v", field(o, "spec", "size"))
				}
				return int64(f), nil
			},
		},
		{
			resource: "leases", kind: "Lease", apis: []soakAPI{{"/apis/coordination.k8s.io/v1", "coordination.k8s.io/v1"}},
			fields: func(v int64) map[string]any {
				return map[string]any{"spec": map[string]any{"holderIdentity": "holder-" + strconv.FormatInt(v, 10)}}
			},
			value: func(o map[string]any) (int64, error) {
				s, ok := strings.CutPrefix(fmt.Sprint(field(o, "spec", "holderIdentity")), "holder-")
				if !ok {
					return 0, fmt.Errorf("lease holder %v", field(o, "spec", "holderIdentity"))
				}
				return parseSoakValue(s)
			},
		},
		{
			resource: "events", kind: "Event", apis: core, budgeted: true,
			fields: func(v int64) map[string]any {
				return map[string]any{
					"involvedObject": map[string]any{"kind": "ConfigMap", "namespace": ns, "name": "soak"},
					"reason":         "Soak", "type": "Normal", "message": strconv.FormatInt(v, 10),
				}
			},
			value: func(o map[string]any) (int64, error) { return parseSoakValue(field(o, "message")) },
		},
	}
}

// field is the value at path in obj, nil if there is none.
func field(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func parseSoakValue(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

// soakMeta is what the soak reads of an object's metadata.
type soakMeta struct {
	name string
	rv   uint64
}

// decodeSoakObject decodes an object and its name and resourceVersion.
func decodeSoakObject(raw []byte) (map[string]any, soakMeta, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, soakMeta{}, fmt.Errorf("decoding an object: %v: %.200s", err, raw)
	}
	name, _ := field(obj, "metadata", "name").(string)
	rv, err := parseRV(field(obj, "metadata", "resourceVersion"))
	if err != nil || name == "" {
		return nil, soakMeta{}, fmt.Errorf("object without a name or resourceVersion (%v): %.200s", err, raw)
	}
	return obj, soakMeta{name: name, rv: rv}, nil
}

// parseRV reads a resourceVersion: kapi's are storage revisions, numbers.
func parseRV(v any) (uint64, error) {
	s, _ := v.(string)
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil || rv == 0 {
		return 0, fmt.Errorf("resourceVersion %q is not a revision", s)
	}
	return rv, nil
}
