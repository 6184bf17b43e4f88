package patch_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
	"github.com/kapi-dev/kapi/schema"
)

// JSON Patch (RFC 6902): a list of operations.
func ExampleJSONPatch() {
	doc := []byte(`{"spec":{"size":1,"tags":["a"]}}`)
	out, _, err := patch.JSONPatch(doc, []byte(`[
		{"op":"replace","path":"/spec/size","value":2},
		{"op":"add","path":"/spec/tags/-","value":"b"}]`), 0)
	fmt.Println(string(out), err)
	// Output:
	// {"spec":{"size":2,"tags":["a","b"]}} <nil>
}

// JSON Merge Patch (RFC 7386): objects merge, null deletes, lists are
// replaced whole.
func ExampleMergePatch() {
	doc := []byte(`{"spec":{"size":1,"color":"red","tags":["a"]}}`)
	out, _, err := patch.MergePatch(doc, []byte(`{"spec":{"color":null,"tags":["b"]}}`))
	fmt.Println(string(out), err)
	// Output:
	// {"spec":{"size":1,"tags":["b"]}} <nil>
}

type Port struct {
	Name string `json:"name" kapi:"required"`
	Port int    `json:"port"`
}

type Spec struct {
	Ports []Port `json:"ports,omitempty" kapi:"listType=map,listMapKeys=name,patchStrategy=merge,patchMergeKey=name"`
}

// Strategic merge patch merges lists by the key the schema declares
// (x-kubernetes-patch-merge-key), here a port's name.
func ExampleStrategic() {
	s, err := schema.For[Spec]()
	if err != nil {
		panic(err)
	}
	original := map[string]any{"ports": []any{
		map[string]any{"name": "http", "port": 80},
		map[string]any{"name": "metrics", "port": 9090},
	}}
	p := map[string]any{"ports": []any{map[string]any{"name": "http", "port": 8080}}}
	out, err := patch.Strategic(original, p, s)
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	// Output:
	// {"ports":[{"name":"http","port":8080},{"name":"metrics","port":9090}]}
}

// Server-side apply: each manager owns the fields it applied, and a second
// manager changing them gets a 409 conflict unless it forces.
func ExampleFieldManager_Apply() {
	s, err := schema.For[struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   meta.ObjectMeta `json:"metadata"`
		Spec       Spec            `json:"spec"`
	}]()
	if err != nil {
		panic(err)
	}
	fm := patch.NewFieldManager(s, meta.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Widget"}, false)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obj := func(port int) map[string]any {
		return map[string]any{"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1"},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": port}}}}
	}
	live, err := fm.Apply(nil, obj(80), patch.ApplyOptions{Manager: "alice", Now: now})
	if err != nil {
		panic(err)
	}
	_, err = fm.Apply(live, obj(81), patch.ApplyOptions{Manager: "bob", Now: now})
	fmt.Println(meta.ReasonOf(err))
	live, err = fm.Apply(live, obj(81), patch.ApplyOptions{Manager: "bob", Force: true, Now: now})
	fmt.Println(err)
	for _, mf := range meta.GetManagedFields(live) {
		fields, _ := json.Marshal(mf.FieldsV1)
		fmt.Println(mf.Manager, mf.Operation, string(fields))
	}
	// Output:
	// Conflict
	// <nil>
	// alice Apply {"f:spec":{"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{}}}}}
	// bob Apply {"f:spec":{"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}
}
