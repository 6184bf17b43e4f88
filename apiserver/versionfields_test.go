package apiserver

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Sprockets in two versions: v1 has spec.color, v2 has it as
// spec.paint.color.
type sprocketV1 struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Size  int64  `json:"size,omitempty"`
		Color string `json:"color,omitempty"`
	} `json:"spec"`
}

type sprocketV2 struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Size  int64 `json:"size,omitempty"`
		Paint struct {
			Color string `json:"color,omitempty"`
		} `json:"paint"`
	} `json:"spec"`
}

// newSprocketServer serves sprockets in v1 and v2 (hub and storage v1).
func newSprocketServer(t *testing.T) *Server {
	t.Helper()
	api := newConfigMapServer(t, Config{})
	base := registry.Resource{Group: "example.dev", Resource: "sprockets", Kind: "Sprocket", Namespaced: true}
	v1, v2 := base, base
	v1.Version, v2.Version = "v1", "v2"
	var err error
	if v1, err = registry.ForType[sprocketV1](v1); err != nil {
		t.Fatal(err)
	}
	if v2, err = registry.ForType[sprocketV2](v2); err != nil {
		t.Fatal(err)
	}
	toHub := func(src *sprocketV2, dst *sprocketV1) error {
		dst.Metadata, dst.Spec.Size, dst.Spec.Color = src.Metadata, src.Spec.Size, src.Spec.Paint.Color
		return nil
	}
	fromHub := func(src *sprocketV1, dst *sprocketV2) error {
		if src.Spec.Color == "unconvertible" {
			return errors.New("no such color in v2")
		}
		dst.Metadata, dst.Spec.Size, dst.Spec.Paint.Color = src.Metadata, src.Spec.Size, src.Spec.Color
		return nil
	}
	if err := api.RegisterVersions(registry.Versions{Versions: []registry.Resource{v1, v2}, Storage: "v1",
		Conversion: registry.Conversion{Spokes: map[string]registry.Spoke{"v2": registry.TypedSpoke(toHub, fromHub)}}}); err != nil {
		t.Fatal(err)
	}
	return api
}

// Server-side apply through two versions of one type: spec.color in v1
// and spec.paint.color in v2 are one field, and each managedFields entry
// keeps the version it was made in.
func TestApplyAcrossVersions(t *testing.T) {
	ts := httptest.NewServer(newSprocketServer(t))
	t.Cleanup(ts.Close)
	p1 := "/apis/example.dev/v1/namespaces/default/sprockets/s"
	p2 := "/apis/example.dev/v2/namespaces/default/sprockets/s"
	const (
		aColor = `{"apiVersion":"example.dev/v1","kind":"Sprocket","metadata":{"name":"s"},"spec":{"size":1,"color":"red"}}`
		aSize  = `{"apiVersion":"example.dev/v1","kind":"Sprocket","metadata":{"name":"s"},"spec":{"size":1}}`
		bColor = `{"apiVersion":"example.dev/v2","kind":"Sprocket","metadata":{"name":"s"},"spec":{"paint":{"color":"blue"}}}`
	)
	mustCode(t, do(t, ts, "PATCH", p1+"?fieldManager=a", aColor, "Content-Type", ctApply), 201)

	// b applies the field through v2 with another value: a 409 naming a
	// and the field as a's entry (v1) names it.
	st := do(t, ts, "PATCH", p2+"?fieldManager=b", bColor, "Content-Type", ctApply).status(t, 409, meta.StatusReasonConflict)
	if st.Message != `Apply failed with 1 conflict: conflict with "a": .spec.color` {
		t.Errorf("conflict: %q", st.Message)
	}

	// Forced, b owns it and a no longer does.
	got := mustCode(t, do(t, ts, "PATCH", p2+"?fieldManager=b&force=true", bColor, "Content-Type", ctApply), 200)
	wantEntries := func(what string, o map[string]any, want map[string]string) {
		t.Helper()
		if n := len(managedFieldsOf(t, o)); n != len(want) {
			t.Errorf("%s: %d entries, want %d: %s", what, n, len(want), str(o, "metadata", "managedFields"))
		}
		for key, w := range want {
			var e map[string]any
			for _, op := range []string{"Apply", "Update"} {
				if e == nil {
					e = entry(t, o, key, op)
				}
			}
			if e == nil || !jsonEq(t, map[string]any{"apiVersion": e["apiVersion"], "operation": e["operation"], "fieldsV1": e["fieldsV1"]}, w) {
				t.Errorf("%s: %s's entry %v, want %s", what, key, e, w)
			}
		}
	}
	wantEntries("after b's forced apply", got, map[string]string{
		"a": `{"apiVersion":"example.dev/v1","operation":"Apply","fieldsV1":{"f:spec":{"f:size":{}}}}`,
		"b": `{"apiVersion":"example.dev/v2","operation":"Apply","fieldsV1":{"f:spec":{"f:paint":{"f:color":{}}}}}`,
	})
	if str(got, "spec", "paint", "color") != "blue" {
		t.Errorf("after b's forced apply: %s", str(got, "spec"))
	}

	// a re-applies through v1 without the field: it stays, b's.
	got = mustCode(t, do(t, ts, "PATCH", p1+"?fieldManager=a", aSize, "Content-Type", ctApply), 200)
	if str(got, "spec", "color") != "blue" || entry(t, got, "b", "Apply") == nil {
		t.Errorf("after a's re-apply without the color: %s", got)
	}

	// a takes it back through v1; a PUT through v2 changing it takes it
	// from a, recorded in v2.
	mustCode(t, do(t, ts, "PATCH", p1+"?fieldManager=a&force=true", aColor, "Content-Type", ctApply), 200)
	cur := mustCode(t, do(t, ts, "GET", p2, ""), 200)
	cur["spec"].(map[string]any)["paint"] = map[string]any{"color": "green"}
	body, err := json.Marshal(cur)
	if err != nil {
		t.Fatal(err)
	}
	mustCode(t, do(t, ts, "PUT", p2+"?fieldManager=ctl", string(body)), 200)
	for _, p := range []string{p1, p2} {
		wantEntries("GET "+p, mustCode(t, do(t, ts, "GET", p, ""), 200), map[string]string{
			"a":   `{"apiVersion":"example.dev/v1","operation":"Apply","fieldsV1":{"f:spec":{"f:size":{}}}}`,
			"ctl": `{"apiVersion":"example.dev/v2","operation":"Update","fieldsV1":{"f:spec":{"f:paint":{"f:color":{}}}}}`,
		})
	}
	st = do(t, ts, "PATCH", p1+"?fieldManager=a", aColor, "Content-Type", ctApply).status(t, 409, meta.StatusReasonConflict)
	if st.Message != `Apply failed with 1 conflict: conflict with "ctl" using example.dev/v2: .spec.paint.color` {
		t.Errorf("conflict with the PUT: %q", st.Message)
	}

	// An apply whose conversion into an entry's version fails is a 500
	// naming the type, versions and object; nothing is written.
	bad := `{"apiVersion":"example.dev/v1","kind":"Sprocket","metadata":{"name":"s"},"spec":{"size":1,"color":"unconvertible"}}`
	st = do(t, ts, "PATCH", p1+"?fieldManager=a&force=true", bad, "Content-Type", ctApply).status(t, 500, meta.StatusReasonInternalError)
	if !strings.Contains(st.Message, `converting example.dev/v1 Sprocket "default/s" to example.dev/v2: no such color in v2`) {
		t.Errorf("failed conversion: %q", st.Message)
	}
	if got := mustCode(t, do(t, ts, "GET", p2, ""), 200); str(got, "spec", "paint", "color") != "green" {
		t.Errorf("after the failed apply: %s", str(got, "spec"))
	}
}
