package patch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// richSchema has every kind of field structured-merge-diff tells apart:
// granular and atomic maps, set, map (one and two keys), merge-strategy and
// atomic lists, lists of lists, nested objects, unstructured and
// int-or-string values, formats, an embedded resource and a status.
const richSchema = `{"type":"object","properties":{
 "spec":{"type":"object","properties":{
  "size":{"type":"integer"},"ratio":{"type":"number"},"on":{"type":"boolean"},"color":{"type":"string"},
  "when":{"type":"string","format":"date-time"},"blob":{"type":"string","format":"byte"},
  "port":{"x-kubernetes-int-or-string":true},"anything":{},
  "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
  "nums":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"number"}},
  "args":{"type":"array","items":{"type":"string"}},
  "matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"}}},
  "labels":{"type":"object","additionalProperties":{"type":"string"}},
  "granular":{"type":"object","x-kubernetes-map-type":"granular","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"type":"integer"}}}}},
  "selector":{"type":"object","x-kubernetes-map-type":"atomic","additionalProperties":{"type":"string"}},
  "atomicObj":{"type":"object","x-kubernetes-map-type":"atomic","properties":{"x":{"type":"string"},"y":{"type":"array","items":{"type":"string"}}}},
  "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
  "free":{"type":"object","additionalProperties":true},
  "nested":{"type":"object","properties":{"inner":{"type":"object","properties":{"deep":{"type":"object","additionalProperties":{"type":"object","properties":{"v":{"type":"string"}}}}}}}},
  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string"}}}},
  "pairs":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["port","protocol"],"items":{"type":"object","properties":{"port":{"type":"integer"},"protocol":{"type":"string"},"note":{"type":"string"}}}},
  "containers":{"type":"array","x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name","items":{"type":"object","properties":{"name":{"type":"string"},"env":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"string"}}}}}}},
  "atomicList":{"type":"array","x-kubernetes-list-type":"atomic","items":{"type":"object","properties":{"k":{"type":"string"}}}},
  "template":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"spec":{"type":"object","properties":{"n":{"type":"integer"}}}}}
 }},
 "data":{"type":"object","additionalProperties":{"type":"string"}},
 "status":{"type":"object","properties":{"phase":{"type":"string"},"conditions":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],"items":{"type":"object","properties":{"type":{"type":"string"},"status":{"type":"string"}}}}}}}}`

// createFieldsCases are objects for the differential tests, each created
// with and without a status subresource.
var createFieldsCases = []string{
	// Keys encoding/json escapes (<, >, &, U+2028, invalid UTF-8) or not
	// (other non-ASCII).
	"{\"metadata\":{\"name\":\"n\",\"labels\":{\"<a&>\":\"x\",\"l\\u2028\":\"y\",\"\u00e9\":\"z\"}},\"data\":{\"<b>\":\"v\",\"\xff\":\"w\",\"q\\\"\\\\\":\"u\"}}",
	// A configmap as kbench creates it, as the store hands it over.
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","uid":"u","creationTimestamp":"2010-10-10T00:00:00Z","generation":1},"data":{"k0":"v","k1":"w"}}`,
	// Only what is never recorded: no managedFields.
	`{"apiVersion":"v1","kind":"X","metadata":{"name":"n","namespace":"ns"}}`,
	`{"metadata":{}}`,
	`{"metadata":null}`,
	`{"metadata":{"name":null,"labels":null,"annotations":{}}}`,
	// Metadata fields that are recorded.
	`{"metadata":{"name":"n","generateName":"g-","labels":{"a":"b","c":""},"annotations":{"x/y":"z"},"finalizers":["f","g"],
	  "ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"1","controller":true},{"uid":"2","name":"p"}]}}`,
	`{"metadata":{"finalizers":["f","f","g"],"ownerReferences":[{"uid":"1"},{"uid":"1","name":"x"}]}}`,
	`{"metadata":{"finalizers":[],"ownerReferences":[],"deletionGracePeriodSeconds":30}}`,
	// Scalars of every type, nulls and empty values.
	`{"metadata":{"name":"n"},"spec":{"size":3,"ratio":0.5,"on":false,"color":"","when":"2010-10-10T00:00:00Z","blob":"aGk=","port":8080,"anything":"x"}}`,
	`{"metadata":{"name":"n"},"spec":{"size":null,"ratio":1e300,"color":null,"port":"http","anything":{"a":[1]}}}`,
	`{"metadata":{"name":"n"},"spec":{"anything":[]},"data":{},"status":null}`,
	`{"metadata":{"name":"n"},"spec":{}}`,
	`{"metadata":{"name":"n"},"spec":null}`,
	// Lists.
	`{"metadata":{"name":"n"},"spec":{"tags":["a","b","a"],"nums":[1,1.0,2.5,-0],"args":["x","x"],"matrix":[[1,2],[],[3]]}}`,
	`{"metadata":{"name":"n"},"spec":{"tags":[],"args":[],"matrix":null,"ports":[]}}`,
	`{"metadata":{"name":"n"},"spec":{"ports":[{"name":"http","port":80},{"name":"https","port":443,"protocol":"TCP"},{"name":null}]}}`,
	`{"metadata":{"name":"n"},"spec":{"ports":[{"name":"a","port":1},{"name":"a","port":2},{"name":"b"}]}}`,
	`{"metadata":{"name":"n"},"spec":{"pairs":[{"port":80,"protocol":"TCP"},{"port":80},{"protocol":"UDP","note":"n"},{"port":80,"protocol":"TCP","note":"dup"}]}}`,
	`{"metadata":{"name":"n"},"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"1"},{"name":"B"}]},{"name":"d","env":[]}]}}`,
	`{"metadata":{"name":"n"},"spec":{"atomicList":[{"k":"a"},{"k":"a"}],"atomicObj":{"x":"1","y":["a"]},"selector":{"a":"b"}}}`,
	`{"metadata":{"name":"n"},"spec":{"atomicObj":{},"selector":null}}`,
	// Maps, nested objects, unstructured values, embedded resources.
	`{"metadata":{"name":"n"},"spec":{"labels":{"a":"b","c":null},"granular":{"a":"x","b":{"c":1}},"nested":{"inner":{"deep":{"k":{"v":"1"},"l":{}}}}}}`,
	`{"metadata":{"name":"n"},"spec":{"extra":{"a":{"b":[{"c":1}],"d":null,"e":{}},"f":1.5},"free":{"x":{"y":"z"},"w":[1,"a"]}}}`,
	`{"metadata":{"name":"n"},"spec":{"template":{"apiVersion":"v1","kind":"K","metadata":{"name":"t","labels":{"a":"b"}},"spec":{"n":1}}}}`,
	`{"metadata":{"name":"n"},"status":{"phase":"Ready","conditions":[{"type":"A","status":"True"}]},"data":{"a":"b"}}`,
	`{"apiVersion":"v1","kind":"X","metadata":{"name":"n","namespace":"ns","uid":"u","resourceVersion":"","selfLink":"s","creationTimestamp":null,"generation":2,"labels":{"a":"b"}},"data":{"k":"v"}}`,
	// managedFields in the request.
	`{"metadata":{"name":"n","managedFields":[{}]},"data":{"a":"b"}}`,
	`{"metadata":{"name":"n","managedFields":[]},"data":{"a":"b"}}`,
	`{"metadata":{"name":"n","managedFields":"bad"},"data":{"a":"b"}}`,
	`{"metadata":{"name":"n","managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]},"data":{"a":"b","c":"d"}}`,
	// Objects the schema cannot read: no managedFields either way.
	`{"metadata":{"name":"n"},"spec":{"size":"three"}}`,
	`{"metadata":{"name":"n"},"spec":{"unknown":1}}`,
	`{"metadata":{"name":"n","clusterName":"c"}}`,
	`{"metadata":{"name":"n"},"spec":{"ports":[{"port":1}]}}`,
	`{"metadata":{"name":"n"},"spec":{"ports":[null]}}`,
	`{"metadata":{"name":"n"},"spec":{"tags":[["a"]]}}`,
	`{"metadata":{"name":"n"},"spec":{"tags":[null]}}`,
	`{"metadata":{"name":"n"},"spec":{"atomicObj":{"x":1}}}`,
	`{"metadata":{"name":"n"},"spec":{"atomicList":[{"k":1}]}}`,
	`{"metadata":{"name":"n"},"spec":{"ports":[{"name":"a","port":"x"},{"name":"a"}]}}`,
	`{"metadata":{"name":"n"},"spec":{"ratio":1e400}}`,
	`{"metadata":{"name":"n"},"spec":[]}`,
	`{"metadata":"n"}`,
	`{"metadata":{"name":"n","labels":{"a":1}}}`,
	`{"kind":1,"metadata":{"name":"n"}}`,
}

// createBoth creates o (decoded from JSON) with the direct walker and with
// structured-merge-diff, and fails unless the results are the same bytes.
// It reports whether the walker handled the object.
func createBoth(t testing.TB, fast, ref *FieldManager, js, manager string) bool {
	t.Helper()
	v, _, err := codec.DecodeJSON([]byte(js))
	if err != nil {
		// The decoder refuses numbers beyond float64 ("1e400"); a hook may
		// still store one, so the field managers get them as json.Number.
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("bad case %s: %v", js, err)
		}
	}
	o, ok := v.(map[string]any)
	if !ok {
		return false
	}
	now := time.Date(2010, 10, 10, 1, 2, 3, 456, time.FixedZone("x", 3600))
	a, b := meta.DeepCopyMap(o), meta.DeepCopyMap(o)
	errA := fast.Update(nil, a, manager, "", now)
	errB := ref.Update(nil, b, manager, "", now)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("%s (status %v): error %v, structured-merge-diff's %v", js, fast.status, errA, errB)
	}
	if ja, jb := toJSON(t, a), toJSON(t, b); ja != jb {
		t.Fatalf("%s (status %v):\n got %s\nwant %s", js, fast.status, ja, jb)
	}
	// The direct path's fieldsV1 is JSON text, which json.Marshal above
	// compacts and escapes again: its own bytes must already be what
	// encoding/json writes for structured-merge-diff's map.
	if raw, ok := fieldsV1Of(a).(json.RawMessage); ok {
		if want := toJSON(t, fieldsV1Of(b)); string(raw) != want {
			t.Fatalf("%s (status %v): fieldsV1 text\n got %s\nwant %s", js, fast.status, raw, want)
		}
	}
	fast.init()
	md, _ := meta.DeepCopyMap(o)["metadata"].(map[string]any)
	if md == nil {
		return false
	}
	delete(md, "managedFields")
	c := meta.DeepCopyMap(o)
	c["metadata"] = md
	_, handled := fast.createFieldsV1(c)
	return handled
}

// fieldManagerPairs are field managers of the test schemas, with and
// without a status subresource: the first of each pair uses the direct
// walker, the second structured-merge-diff only.
func fieldManagerPairs(t testing.TB) [][2]*FieldManager {
	var out [][2]*FieldManager
	for _, s := range []string{richSchema, configMapSchema} {
		for _, status := range []bool{false, true} {
			fast := NewFieldManager(mustSchema(t, s), widgetGVK, status)
			ref := NewFieldManager(mustSchema(t, s), widgetGVK, status)
			ref.smdOnly = true
			out = append(out, [2]*FieldManager{fast, ref})
		}
	}
	return out
}

func TestCreateFieldsMatchSMD(t *testing.T) {
	handled := 0
	pairs := fieldManagerPairs(t)
	for _, js := range createFieldsCases {
		for _, p := range pairs {
			for _, manager := range []string{"", "kubectl-create", "m\xff"} {
				if createBoth(t, p[0], p[1], js, manager) {
					handled++
				}
			}
		}
	}
	// Most valid objects take the direct path.
	if total := len(createFieldsCases) * len(pairs) * 3; handled < total/3 {
		t.Errorf("the walker handled %d of %d creates", handled, total)
	}
}

// TestCreateFieldsWalker checks the walker handles (does not leave to
// structured-merge-diff) the objects it is for, and the FieldsV1 it makes.
func TestCreateFieldsWalker(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, richSchema), widgetGVK, true)
	fm.init()
	for _, tc := range []struct{ in, want string }{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","uid":"u","generation":1},"data":{"k0":"v"}}`,
			`{"f:data":{".":{},"f:k0":{}}}`},
		{`{"metadata":{"name":"n","labels":{"a":"b"}},"spec":{"ports":[{"name":"a","port":1},{"name":"a"}],"tags":["x"],"selector":{"a":"b"}},"status":{"phase":"p"}}`,
			`{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{".":{},"f:ports":{".":{},"k:{\"name\":\"a\"}":{}},"f:selector":{},"f:tags":{".":{},"v:\"x\"":{}}}}`},
		{`{"metadata":{"name":"n"},"spec":{"pairs":[{"port":80,"protocol":"TCP","note":"x"}]}}`,
			`{"f:spec":{".":{},"f:pairs":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:note":{},"f:port":{},"f:protocol":{}}}}}`},
		{`{"metadata":{"name":"n"}}`, `null`},
	} {
		o := obj(t, tc.in)
		got, ok := fm.createFieldsV1(o)
		if !ok {
			t.Errorf("%s: not handled", tc.in)
			continue
		}
		if g := toJSON(t, got); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, g, tc.want)
		}
	}
}

// FuzzCreateFields holds the direct computation of a create's
// managedFields to structured-merge-diff's, byte for byte, on any object.
func FuzzCreateFields(f *testing.F) {
	for _, js := range createFieldsCases {
		f.Add([]byte(js), uint8(0))
		f.Add([]byte(js), uint8(3))
	}
	pairs := fieldManagerPairs(f)
	f.Fuzz(func(t *testing.T, p []byte, mode uint8) {
		if len(p) > 1<<14 || !json.Valid(p) {
			return
		}
		manager := "fuzz"
		if mode&4 != 0 {
			manager = ""
		}
		pair := pairs[int(mode&3)]
		createBoth(t, pair[0], pair[1], string(p), manager)
	})
}

func BenchmarkCreateFields(b *testing.B) {
	// A configmap as kbench's create workload sends it, as the store hands
	// it over.
	js := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-00001","namespace":"kb-ns-1","labels":{"app":"kbench","shard":"1"},
	  "uid":"8a0d6f3e-1b1c-4a59-9a8e-2f6c1d1e9b41","creationTimestamp":"2010-10-10T00:00:00Z"},"data":{"idx":"1","payload":"` + strings.Repeat("x", 2048) + `"}}`
	for _, smdOnly := range []bool{false, true} {
		name := "walker"
		if smdOnly {
			name = "smd"
		}
		b.Run(name, func(b *testing.B) {
			fm := NewFieldManager(mustSchema(b, configMapSchema), widgetGVK, false)
			fm.smdOnly = smdOnly
			o := obj(b, js)
			b.ReportAllocs()
			for b.Loop() {
				md := o["metadata"].(map[string]any)
				delete(md, "managedFields")
				if err := fm.Update(nil, o, "kbench", "", t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fieldsV1Of is the fieldsV1 of o's first managedFields entry, nil if none.
func fieldsV1Of(o map[string]any) any {
	md, _ := o["metadata"].(map[string]any)
	mf, _ := md["managedFields"].([]any)
	if len(mf) == 0 {
		return nil
	}
	e, _ := mf[0].(map[string]any)
	return e["fieldsV1"]
}
