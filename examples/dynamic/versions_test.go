package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
)

// Gizmos in two versions: v1 has spec.color, v2 has it as spec.paint.color.
const (
	gizmoSchemaV1 = `{"type":"object","properties":{"spec":{"type":"object","properties":{
		"name":{"type":"string"},"color":{"type":"string"}}}}}`
	gizmoSchemaV2 = `{"type":"object","properties":{"spec":{"type":"object","properties":{
		"name":{"type":"string"},"paint":{"type":"object","properties":{"color":{"type":"string"}}}}}}}`
	gizmoHead = `"group":"toys.example.com","plural":"gizmos","kind":"Gizmo","namespaced":true`
	// gizmoMoves converts through the hub v1, moving v2's spec.paint.color.
	gizmoMoves = `{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint.color","hubPath":"spec.color"}]}`
)

// gizmoVersion is one entry of a definition's versions; extra is more of
// its fields (`,"deprecated":true`).
func gizmoVersion(name string, served, storage bool, extra string) string {
	sch := gizmoSchemaV1
	if name == "v2" {
		sch = gizmoSchemaV2
	}
	return fmt.Sprintf(`{"name":%q,"served":%t,"storage":%t,"schema":%s%s}`, name, served, storage, sch, extra)
}

// gizmoDef is the definition of gizmos in versions, converted by gizmoMoves.
func gizmoDef(versions ...string) string {
	return `{` + gizmoHead + `,"versions":[` + strings.Join(versions, ",") + `],"conversion":` + gizmoMoves + `}`
}

// fieldOf returns the value at a dotted path of a JSON object ("<absent>"
// when it is not there).
func fieldOf(t *testing.T, body, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	for _, name := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "<absent>"
		}
		if v, ok = m[name]; !ok {
			return "<absent>"
		}
	}
	return v
}

// TestVersionsAtRunTime takes a type from one version to two while the
// server runs: objects written in either version read in both, with the
// moved field where each version has it; the storage version changes from
// v1 to v2; v1 stops being served; and leaving v1 out is refused while
// objects may still be stored in it.
func TestVersionsAtRunTime(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	typesFile := filepath.Join(dir, "types.json")
	s := serveAPI(t, store, typesFile)
	defer func() { s.stop() }()
	const v1, v2 = "/kube/apis/toys.example.com/v1/namespaces/default/gizmos", "/kube/apis/toys.example.com/v2/namespaces/default/gizmos"
	put := func(def string) {
		t.Helper()
		if code, body := s.call("PUT", "/types/gizmos", def); code != 204 {
			t.Fatalf("PUT /types/gizmos: %d %s", code, body)
		}
	}
	get := func(path, field string, want any) {
		t.Helper()
		code, body := s.call("GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if got := fieldOf(t, body, field); got != want {
			t.Errorf("GET %s: %s = %v, want %v", path, field, got, want)
		}
	}
	// storedIn returns the version object name is stored in, from the
	// stored value's layout: 'k' 1 uvarint(offset of metadata) JSON.
	storedIn := func(name string) string {
		t.Helper()
		key := append(s.api.Registry().ResourcePrefix("toys.example.com", "gizmos", "default"), name...)
		kv, err := store.Get(context.Background(), key, 0)
		if err != nil {
			t.Fatalf("reading %s from storage: %v", key, err)
		}
		_, n := binary.Uvarint(kv.Value[2:])
		if kv.Value[0] != 'k' || n <= 0 {
			t.Fatalf("stored value of an unknown layout: %q", kv.Value)
		}
		return strings.TrimPrefix(fieldOf(t, string(kv.Value[2+n:]), "apiVersion").(string), "toys.example.com/")
	}

	// A definition in one version, as before versions existed.
	put(`{` + gizmoHead + `,"version":"v1","schema":` + gizmoSchemaV1 + `}`)
	if code, body := s.call("POST", v1, `{"apiVersion":"toys.example.com/v1","kind":"Gizmo","metadata":{"name":"g1"},"spec":{"name":"first","color":"red"}}`); code != 201 {
		t.Fatalf("create g1 through v1: %d %s", code, body)
	}

	// v2 is added, v1 stays the storage version and the hub.
	put(gizmoDef(gizmoVersion("v1", true, true, ""), gizmoVersion("v2", true, false, "")))
	get(v2+"/g1", "apiVersion", "toys.example.com/v2")
	get(v2+"/g1", "spec.paint.color", "red")
	get(v2+"/g1", "spec.color", "<absent>")
	get(v1+"/g1", "spec.color", "red")
	if code, body := s.call("GET", "/kube/apis/toys.example.com", ""); code != 200 || !strings.Contains(body, `"preferredVersion":{"groupVersion":"toys.example.com/v2","version":"v2"}`) {
		t.Errorf("discovery of the group: %d %s", code, body)
	}
	if code, body := s.call("POST", v2, `{"apiVersion":"toys.example.com/v2","kind":"Gizmo","metadata":{"name":"g2"},"spec":{"name":"second","paint":{"color":"blue"}}}`); code != 201 ||
		fieldOf(t, body, "spec.paint.color") != "blue" {
		t.Fatalf("create g2 through v2: %d %s", code, body)
	}
	get(v1+"/g2", "spec.color", "blue")
	get(v1+"/g2", "spec.paint", "<absent>")
	if got := storedIn("g2"); got != "v1" {
		t.Errorf("g2, written through v2 while v1 is the storage version, is stored in %s", got)
	}
	if code, body := s.call("GET", v2, ""); code != 200 || !strings.Contains(body, `"paint":{"color":"red"}`) || !strings.Contains(body, `"paint":{"color":"blue"}`) {
		t.Errorf("list through v2: %d %s", code, body)
	}

	// Leaving v1 out is refused: objects are stored in it.
	code, body := s.call("PUT", "/types/gizmos", gizmoDef(gizmoVersion("v2", true, true, "")))
	st := status(t, body)
	if code != 422 || st.Code != 422 || st.Reason != meta.StatusReasonInvalid ||
		st.Message != "registry: gizmos.toys.example.com: objects may still be stored in version v1: keep it among the versions (Unserved if it is no longer served) until a migration to v2 has finished" {
		t.Errorf("PUT without v1: %d %+v", code, st)
	}
	get(v2+"/g2", "spec.paint.color", "blue")

	// The storage version becomes v2: new writes are stored in v2, and the
	// migration rewrites the objects stored in v1; they read the same in
	// both versions all along.
	put(gizmoDef(gizmoVersion("v1", true, false, ""), gizmoVersion("v2", true, true, "")))
	if code, body := s.call("POST", v1, `{"apiVersion":"toys.example.com/v1","kind":"Gizmo","metadata":{"name":"g3"},"spec":{"name":"third","color":"green"}}`); code != 201 {
		t.Fatalf("create g3 through v1: %d %s", code, body)
	}
	if got := storedIn("g3"); got != "v2" {
		t.Errorf("g3, written through v1 after the storage version became v2, is stored in %s", got)
	}
	get(v2+"/g3", "spec.paint.color", "green")
	get(v1+"/g1", "spec.color", "red")
	get(v2+"/g1", "spec.paint.color", "red")
	for deadline := time.Now().Add(20 * time.Second); storedIn("g1") != "v2" || storedIn("g2") != "v2"; {
		if time.Now().After(deadline) {
			t.Fatalf("the migration left g1 in %s and g2 in %s", storedIn("g1"), storedIn("g2"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	get(v1+"/g1", "spec.color", "red")
	get(v2+"/g2", "spec.paint.color", "blue")

	// v1 is deprecated: its answers warn.
	put(gizmoDef(gizmoVersion("v1", true, false, `,"deprecated":true`), gizmoVersion("v2", true, true, "")))
	if _, _, h := s.do("GET", v1+"/g1", ""); h.Get("Warning") != `299 - "toys.example.com/v1 Gizmo is deprecated; use toys.example.com/v2 Gizmo"` {
		t.Errorf("Warning of the deprecated v1: %q", h.Values("Warning"))
	}

	// v1 stops being served: 404 on it; every object reads through v2.
	put(gizmoDef(gizmoVersion("v1", false, false, ""), gizmoVersion("v2", true, true, "")))
	for _, path := range []string{v1, v1 + "/g1", "/kube/apis/toys.example.com/v1"} {
		if code, body := s.call("GET", path, ""); code != 404 {
			t.Errorf("GET %s of the unserved v1: %d %s", path, code, body)
		}
	}
	get(v2+"/g2", "spec.paint.color", "blue")

	// The definitions survive a restart, v1 unserved.
	s.stop()
	s = serveAPI(t, store, typesFile)
	get(v2+"/g2", "spec.paint.color", "blue")
	get(v2+"/g3", "spec.paint.color", "green")
	if code, _ := s.call("GET", v1+"/g1", ""); code != 404 {
		t.Errorf("v1 after a restart: %d", code)
	}

	// Removing the type stops serving it; defined again, its objects are
	// there in both versions.
	if code, body := s.call("DELETE", "/types/gizmos", ""); code != 204 {
		t.Fatalf("DELETE /types/gizmos: %d %s", code, body)
	}
	if code, _ := s.call("GET", v2+"/g2", ""); code != 404 {
		t.Errorf("v2 after the type was removed: %d", code)
	}
	put(gizmoDef(gizmoVersion("v1", true, false, ""), gizmoVersion("v2", true, true, "")))
	get(v1+"/g3", "spec.color", "green")
	get(v2+"/g2", "spec.paint.color", "blue")
}

// TestVersionsNone converts by apiVersion alone: objects of v1beta1 and
// v1 have the same fields.
func TestVersionsNone(t *testing.T) {
	dir := t.TempDir()
	s := serveAPI(t, openStore(t, dir), filepath.Join(dir, "types.json"))
	defer s.stop()
	version := func(name string, storage bool) string {
		return fmt.Sprintf(`{"name":%q,"served":true,"storage":%t,"schema":%s}`, name, storage, gizmoSchemaV1)
	}
	def := `{` + gizmoHead + `,"versions":[` + version("v1beta1", false) + `,` + version("v1", true) + `],"conversion":{"strategy":"None"}}`
	if code, body := s.call("PUT", "/types/gizmos", def); code != 204 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := s.call("POST", "/kube/apis/toys.example.com/v1beta1/namespaces/default/gizmos",
		`{"apiVersion":"toys.example.com/v1beta1","kind":"Gizmo","metadata":{"name":"g1"},"spec":{"color":"red"}}`); code != 201 {
		t.Fatalf("create through v1beta1: %d %s", code, body)
	}
	code, body := s.call("GET", "/kube/apis/toys.example.com/v1/namespaces/default/gizmos/g1", "")
	if code != 200 || fieldOf(t, body, "apiVersion") != "toys.example.com/v1" || fieldOf(t, body, "spec.color") != "red" {
		t.Errorf("read through v1: %d %s", code, body)
	}
}

// TestRefusedVersions: definitions the server cannot serve are refused
// with a 422 Status saying why, and the type stays as it was.
func TestRefusedVersions(t *testing.T) {
	dir := t.TempDir()
	s := serveAPI(t, openStore(t, dir), filepath.Join(dir, "types.json"))
	defer s.stop()
	good := gizmoDef(gizmoVersion("v1", true, true, ""), gizmoVersion("v2", true, false, ""))
	if code, body := s.call("PUT", "/types/gizmos", good); code != 204 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	withConversion := func(conversion string, versions ...string) string {
		return `{` + gizmoHead + `,"versions":[` + strings.Join(versions, ",") + `],"conversion":` + conversion + `}`
	}
	both := []string{gizmoVersion("v1", true, true, ""), gizmoVersion("v2", true, false, "")}
	for _, c := range []struct{ name, def, want string }{
		{"no storage version", gizmoDef(gizmoVersion("v1", true, false, ""), gizmoVersion("v2", true, false, "")),
			"versions: must have exactly one version marked as storage version, found 0"},
		{"two storage versions", gizmoDef(gizmoVersion("v1", true, true, ""), gizmoVersion("v2", true, true, "")),
			"versions: must have exactly one version marked as storage version, found 2 (v1, v2)"},
		{"served left out", gizmoDef(`{"name":"v1","storage":true,"schema":` + gizmoSchemaV1 + `}`),
			"versions[0] (v1): served is required (true or false)"},
		{"version and versions", `{` + gizmoHead + `,"version":"v1","schema":` + gizmoSchemaV1 + `,"versions":[` + gizmoVersion("v1", true, true, "") + `]}`,
			"a definition has either version and schema, or versions, not both"},
		{"warning of a version not deprecated", gizmoDef(gizmoVersion("v1", true, true, `,"deprecationWarning":"old"`)),
			"versions[0] (v1): deprecationWarning can only be set for a deprecated version"},
		{"webhook", withConversion(`{"strategy":"Webhook"}`, both...),
			`conversion.strategy: "Webhook" is not supported: use None or FieldMoves`},
		{"no hub", withConversion(`{"strategy":"FieldMoves","fieldMoves":[]}`, both...),
			"conversion.hub is required with strategy FieldMoves"},
		{"moves with None", withConversion(`{"strategy":"None","hub":"v1"}`, both...),
			"conversion: strategy None takes no hub or fieldMoves"},
		{"a field the schema lacks", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint.colour","hubPath":"spec.color"}]}`, both...),
			"conversion.fieldMoves[0]: path spec.paint.colour: no field spec.paint.colour in the schema of v2"},
		{"a field the hub lacks", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint.color","hubPath":"spec.paint"}]}`, both...),
			"conversion.fieldMoves[0]: hubPath spec.paint: no field spec.paint in the schema of the hub"},
		{"types differ", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint","hubPath":"spec.color"}]}`, both...),
			"conversion.fieldMoves[0]: path spec.paint is of type object, hubPath spec.color of type string"},
		{"a move of the hub", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v1","path":"spec.color","hubPath":"spec.color"}]}`, both...),
			`conversion.fieldMoves[0].version: "v1" is not one of the versions other than the hub v1`},
		{"metadata", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"metadata.name","hubPath":"spec.color"}]}`, both...),
			`conversion.fieldMoves[0]: path: "metadata.name": metadata cannot be moved`},
		{"an empty field name", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec..color","hubPath":"spec.color"}]}`, both...),
			`conversion.fieldMoves[0]: path: "spec..color" has an empty field name (want field names separated by dots, as spec.paint.color)`},
		{"overlapping moves", withConversion(`{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint.color","hubPath":"spec.color"},{"version":"v2","path":"spec.name","hubPath":"spec.color"}]}`, both...),
			"conversion.fieldMoves[1]: overlaps another move of version v2 (spec.paint.color → spec.color)"},
		{"an invalid version", withConversion(`{"strategy":"None"}`, gizmoVersion("v1", true, true, ""), gizmoVersion("two", true, false, "")),
			`registry: invalid version "two" (want v1, v2beta1, ...)`},
	} {
		code, body := s.call("PUT", "/types/gizmos", c.def)
		if st := status(t, body); code != 422 || st.Code != 422 || st.Reason != meta.StatusReasonInvalid || st.Message != c.want {
			t.Errorf("%s: %d %q, want 422 %q", c.name, code, st.Message, c.want)
		}
	}
	if code, body := s.call("GET", "/types", ""); code != 200 || !strings.Contains(body, `"storage":true`) || strings.Contains(body, "Webhook") {
		t.Errorf("the kept definitions: %d %s", code, body)
	}
	if code, body := s.call("GET", "/kube/apis/toys.example.com/v2/namespaces/default/gizmos", ""); code != 200 {
		t.Errorf("the type after refused definitions: %d %s", code, body)
	}
	if code, body := s.call("PUT", "/types/gizmos", "versions: {"); code != 400 || status(t, body).Reason != meta.StatusReasonBadRequest {
		t.Errorf("PUT of a definition that is not YAML: %d %s", code, body)
	}
	if code, body := s.call("DELETE", "/types/nothing", ""); code != 404 || status(t, body).Reason != meta.StatusReasonNotFound {
		t.Errorf("DELETE of an unknown type: %d %s", code, body)
	}
}
