package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Two versions of a widget: v1 has spec.color, v2 has it as
// spec.paint.color.
type verWidgetV1 struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Size  int64  `json:"size"`
		Color string `json:"color,omitempty"`
	} `json:"spec"`
}

type verWidgetV2 struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Size  int64 `json:"size"`
		Paint struct {
			Color string `json:"color,omitempty"`
		} `json:"paint"`
	} `json:"spec"`
}

func verWidgetsV1ToV2(src *verWidgetV1, dst *verWidgetV2) error {
	dst.Metadata = src.Metadata
	dst.Spec.Size, dst.Spec.Paint.Color = src.Spec.Size, src.Spec.Color
	return nil
}

func verWidgetsV2ToV1(src *verWidgetV2, dst *verWidgetV1) error {
	dst.Metadata = src.Metadata
	dst.Spec.Size, dst.Spec.Color = src.Spec.Size, src.Spec.Paint.Color
	return nil
}

// verWidgets is widgets in v1 and v2 (hub v1), stored in storageVersion.
func verWidgets(t testing.TB, storageVersion string) Versions {
	t.Helper()
	base := Resource{Group: "example.dev", Resource: "widgets", Kind: "Widget", Namespaced: true}
	v1 := base
	v1.Version = "v1"
	v1, err := ForType[verWidgetV1](v1)
	if err != nil {
		t.Fatal(err)
	}
	v2 := base
	v2.Version = "v2"
	if v2, err = ForType[verWidgetV2](v2); err != nil {
		t.Fatal(err)
	}
	return Versions{
		Versions: []Resource{v1, v2},
		Storage:  storageVersion,
		Conversion: Conversion{Hub: "v1", Spokes: map[string]Spoke{
			"v2": TypedSpoke(verWidgetsV2ToV1, verWidgetsV1ToV2),
		}},
	}
}

func newVersionsRegistry(t testing.TB) *Registry {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg, err := New(Config{Storage: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

func versionStore(t *testing.T, reg *Registry, v string) *Store {
	t.Helper()
	st, ok := reg.Store(meta.GroupVersionResource{Group: "example.dev", Version: v, Resource: "widgets"})
	if !ok {
		t.Fatalf("example.dev/%s widgets is not served", v)
	}
	return st
}

// getAs reads one widget through version v and decodes it.
func getAs(t *testing.T, reg *Registry, v, name string) map[string]any {
	t.Helper()
	b, err := versionStore(t, reg, v).Get(context.Background(), "default", name, "")
	if err != nil {
		t.Fatalf("get %s through %s: %v", name, v, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

func TestVersionsReadAndWriteThroughEveryVersion(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"l":"1"}},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v2").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"b"},"spec":{"size":2,"paint":{"color":"blue"}}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	a2 := getAs(t, reg, "v2", "a")
	if a2["apiVersion"] != "example.dev/v2" || spec(a2)["paint"].(map[string]any)["color"] != "red" || spec(a2)["color"] != nil {
		t.Errorf("a through v2: %v", a2)
	}
	if md := a2["metadata"].(map[string]any); md["labels"].(map[string]any)["l"] != "1" || md["uid"] == "" || md["resourceVersion"] == "" {
		t.Errorf("a through v2 lost metadata: %v", md)
	}
	b1 := getAs(t, reg, "v1", "b")
	if b1["apiVersion"] != "example.dev/v1" || spec(b1)["color"] != "blue" {
		t.Errorf("b through v1: %v", b1)
	}
	// b was written through v2 but stored in the storage version, v1.
	kv, err := reg.Storage().Get(ctx, versionStore(t, reg, "v1").key("default", "b"), 0)
	if err != nil || !strings.Contains(string(kv.Value), `"apiVersion":"example.dev/v1"`) {
		t.Errorf("b stored as %q, %v; want example.dev/v1", kv.Value, err)
	}

	// An update through v2 of an object created through v1.
	a2["spec"].(map[string]any)["paint"] = map[string]any{"color": "green"}
	if _, err := versionStore(t, reg, "v2").Update(ctx, "default", "a", a2, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if a1 := getAs(t, reg, "v1", "a"); spec(a1)["color"] != "green" {
		t.Errorf("a through v1 after an update through v2: %v", a1)
	}

	// Lists through either version carry every object in that version.
	for _, v := range []string{"v1", "v2"} {
		var res ListResult
		if err := versionStore(t, reg, v).List(ctx, "default", ListOptions{}, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 2 {
			t.Fatalf("list through %s: %d items", v, len(res.Items))
		}
		for _, it := range res.Items {
			if !strings.Contains(string(it), `"apiVersion":"example.dev/`+v+`"`) {
				t.Errorf("list through %s: %s", v, it)
			}
		}
	}
}

func TestVersionsStorageVersionChangeKeepsOldObjectsReadable(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"old"},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"new"},"spec":{"size":1,"color":"teal"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := reg.Storage().Get(ctx, versionStore(t, reg, "v1").key("default", "new"), 0)
	if err != nil || !strings.Contains(string(kv.Value), `"apiVersion":"example.dev/v2"`) {
		t.Errorf("new stored as %q, %v; want example.dev/v2", kv.Value, err)
	}
	for _, v := range []string{"v1", "v2"} {
		for _, name := range []string{"old", "new"} {
			if obj := getAs(t, reg, v, name); obj["apiVersion"] != "example.dev/"+v {
				t.Errorf("%s through %s: %v", name, v, obj)
			}
		}
	}
	recs, err := reg.RecordedTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Resource == "widgets" && (rec.StorageVersion != "v2" || strings.Join(rec.StoredVersions, ",") != "v1,v2") {
			t.Errorf("record %+v: want storage v2, stored v1,v2 (in the order they became the storage version)", rec)
		}
	}
	// v1 may still hold objects: it cannot go, but it may stop being served.
	def := verWidgets(t, "v2")
	def.Versions = def.Versions[1:]
	def.Conversion = Conversion{None: true}
	if err := reg.RegisterVersions(def); err == nil || !strings.Contains(err.Error(), "may still be stored in version v1") {
		t.Errorf("removing a stored version: %v", err)
	}
	if err := reg.Unregister(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}); err == nil {
		t.Error("unregistering a stored version succeeded")
	}
	def = verWidgets(t, "v2")
	def.Versions[0].Unserved = true
	if err := reg.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Store(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}); ok {
		t.Error("an unserved version is served")
	}
	if obj := getAs(t, reg, "v2", "old"); spec(obj)["paint"].(map[string]any)["color"] != "red" {
		t.Errorf("old through v2 with v1 unserved: %v", obj)
	}
	if st, ok := reg.StoreForGroupResource(meta.GroupResource{Group: "example.dev", Resource: "widgets"}); !ok || st.res.Version != "v2" {
		t.Errorf("StoreForGroupResource: %v %v, want the storage version's", st, ok)
	}
}

func TestVersionsConversionFailures(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	def := verWidgets(t, "v1")
	orig := def.Conversion.Spokes["v2"]
	def.Conversion.Spokes["v2"] = Spoke{
		ToHub: orig.ToHub,
		FromHub: func(obj Object) (Object, error) {
			switch spec(obj)["color"] {
			case "panic":
				panic("boom")
			case "fail":
				return nil, errors.New("no such color")
			}
			return orig.FromHub(obj)
		},
	}
	if err := reg.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"panic", "fail", "ok"} {
		if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
			`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"`+c+`"},"spec":{"size":1,"color":"`+c+`"}}`), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"panic", `converting example.dev/v1 Widget "default/panic" to example.dev/v2: the conversion panicked: boom`},
		{"fail", `converting example.dev/v1 Widget "default/fail" to example.dev/v2: no such color`},
	} {
		_, err := versionStore(t, reg, "v2").Get(ctx, "default", c.name, "")
		se := wantStatus(t, "get "+c.name, err, 500, "")
		if !strings.Contains(se.Status.Message, c.want) {
			t.Errorf("get %s: %q, want it to contain %q", c.name, se.Status.Message, c.want)
		}
	}
	var res ListResult
	err := versionStore(t, reg, "v2").List(ctx, "default", ListOptions{}, &res)
	if se := wantStatus(t, "list", err, 500, ""); !strings.Contains(se.Status.Message, `Widget "default/fail"`) {
		t.Errorf("list: %q does not name the object", se.Status.Message)
	}
	if _, err := versionStore(t, reg, "v2").Get(ctx, "default", "ok", ""); err != nil {
		t.Errorf("a convertible object after failures: %v", err)
	}
}

func TestRegisterVersionsRefusals(t *testing.T) {
	reg := newVersionsRegistry(t)
	for name, c := range map[string]struct {
		change func(*Versions)
		want   string
	}{
		"no storage version":  {func(d *Versions) { d.Storage = "" }, `the storage version "" must be one of the versions`},
		"unknown storage":     {func(d *Versions) { d.Storage = "v3" }, `the storage version "v3" must be one of the versions`},
		"missing spoke":       {func(d *Versions) { delete(d.Conversion.Spokes, "v2") }, "version v2 has no conversion to and from the hub v1"},
		"half spoke":          {func(d *Versions) { d.Conversion.Spokes["v2"] = Spoke{ToHub: d.Conversion.Spokes["v2"].ToHub} }, "version v2 has no conversion"},
		"internal hub":        {func(d *Versions) { d.Conversion.Hub = "internal" }, "version v1 has no conversion to and from the hub internal"},
		"spoke for the hub":   {func(d *Versions) { d.Conversion.Spokes["v1"] = d.Conversion.Spokes["v2"] }, `a spoke for "v1"`},
		"twice":               {func(d *Versions) { d.Versions[1].Version = "v1" }, "version v1 is listed twice"},
		"other kind":          {func(d *Versions) { d.Versions[1].Kind = "Gadget" }, "differ in kind"},
		"other scope":         {func(d *Versions) { d.Versions[1].Namespaced = false }, "differ in kind"},
		"none with spokes":    {func(d *Versions) { d.Conversion.None = true }, "conversion None takes no hub or spokes"},
		"unserved in a plain": {nil, "Unserved is for a version registered with RegisterVersions"},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if c.change == nil {
				res := verWidgets(t, "v1").Versions[0]
				res.Unserved = true
				err = reg.Register(res)
			} else {
				def := verWidgets(t, "v1")
				c.change(&def)
				err = reg.RegisterVersions(def)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	// A type in several versions is changed only as a whole.
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(verWidgets(t, "v1").Versions[0]); err == nil || !strings.Contains(err.Error(), "RegisterVersions") {
		t.Errorf("Register of a version of a set: %v", err)
	}
}

func TestVersionsDeprecationWarning(t *testing.T) {
	reg := newVersionsRegistry(t)
	def := verWidgets(t, "v2")
	beta := def.Versions[0]
	beta.Version, beta.Deprecated = "v1beta1", true
	def.Versions[0].Deprecated = true
	def.Versions = append(def.Versions, beta)
	def.Conversion = Conversion{None: true}
	if err := reg.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{
		"v1beta1": "example.dev/v1beta1 Widget is deprecated; use example.dev/v2 Widget",
		"v1":      "example.dev/v1 Widget is deprecated; use example.dev/v2 Widget",
		"v2":      "",
	} {
		if got := versionStore(t, reg, v).res.DeprecationWarning; got != want {
			t.Errorf("%s: %q, want %q", v, got, want)
		}
	}
}

// A conversion's result is pruned with the target version's schema: with
// None, a field only v2 has is not seen through v1.
func TestVersionsConversionResultIsPruned(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	def := verWidgets(t, "v2")
	def.Conversion = Conversion{None: true}
	if err := reg.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v2").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"paint":{"color":"red"}}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := getAs(t, reg, "v1", "a"); len(spec(got)) != 1 || spec(got)["size"] == nil {
		t.Errorf("through v1: spec %v, want only size", spec(got))
	}
}

// A type registered with Register, then with RegisterVersions: a request
// that still holds the plain registration's Store cannot write after the
// change (a 409 the client retries), so no object lands in the old form
// behind a migration.
func TestPlainRegistrationReplacedRefusesWrites(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.Register(verWidgets(t, "v1").Versions[0]); err != nil {
		t.Fatal(err)
	}
	plain := versionStore(t, reg, "v1")
	if _, err := plain.Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	_, err := plain.Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1,"color":"red"}}`), WriteOptions{})
	wantStatus(t, "a create through the replaced plain registration", err, 409, "")
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatalf("a create through the new registration: %v", err)
	}
	kv, err := reg.Storage().Get(ctx, versionStore(t, reg, "v1").key("default", "b"), 0)
	if err != nil || !strings.Contains(string(kv.Value), `"apiVersion":"example.dev/v2"`) {
		t.Errorf("b stored as %q, %v; want example.dev/v2", kv.Value, err)
	}
}
