package apiserver

import (
	"context"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// A host changes the storage version of a type while the server runs:
// the server's controllers migrate its objects, Server.Migrations and the
// metrics show it, and then the old version can be removed.
func TestServerMigratesStorageVersion(t *testing.T) {
	api, reg, ts := newMetricsServer(t)
	ctx := context.Background()
	versions := func(storage string, names ...string) registry.Versions {
		def := registry.Versions{Storage: storage, Conversion: registry.Conversion{None: true}}
		for _, v := range names {
			res := widgetResource(t)
			res.Version = v
			def.Versions = append(def.Versions, res)
		}
		return def
	}
	migrated := func(storage string) func() bool {
		return func() bool {
			ms, err := api.Migrations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(ms) == 1 && ms[0].StorageVersion == storage && ms[0].Complete
		}
	}
	// widgets were served with Register until now: any of the versions
	// could hold objects until a first migration (with nothing to rewrite)
	// has found out.
	if err := api.RegisterVersions(versions("v1", "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first migration", migrated("v1"))
	for _, name := range []string{"a", "b", "c"} {
		do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"`+name+`"},"spec":{"size":1}}`).object(t)
	}
	if err := api.RegisterVersions(versions("v2", "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the migration to v2", migrated("v2"))
	ms, _ := api.Migrations(ctx)
	if m := ms[0]; m.Resource != "widgets" || m.Migrated != 3 || strings.Join(m.StoredVersions, ",") != "v2" {
		t.Errorf("status: %+v", m)
	}
	for name, want := range map[string]float64{"kapi_storage_migration_objects_migrated_total": 3, "kapi_storage_migrations_completed_total": 2} {
		if v, ok := gatheredValue(t, reg, name); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	crd := do(t, ts, "GET", crdsPath+"/widgets.example.dev", "").object(t)
	if got := pathString(crd, "status.storedVersions"); got != `["v2"]` {
		t.Errorf("the CRD's storedVersions after the migration: %s", got)
	}
	if err := api.RegisterVersions(versions("v2", "v2")); err != nil {
		t.Fatalf("removing v1 after the migration: %v", err)
	}
	r := do(t, ts, "GET", strings.Replace(wdPath, "/v1/", "/v2/", 1)+"/a", "")
	if r.code != 200 || !strings.Contains(string(r.body), `"apiVersion":"example.dev/v2"`) {
		t.Errorf("a through v2: %d %s", r.code, r.body)
	}
	do(t, ts, "GET", wdPath+"/a", "").status(t, 404, "NotFound")
}
