package registry

import (
	"context"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// versionsBench registers widgets plainly (v1 only) or in two versions
// stored in v1, with n objects created through v1.
func versionsBench(tb testing.TB, versioned bool, n int) *Registry {
	reg := newVersionsRegistry(tb)
	def := verWidgets(tb, "v1")
	var err error
	if versioned {
		err = reg.RegisterVersions(def)
	} else {
		err = reg.Register(def.Versions[0])
	}
	if err != nil {
		tb.Fatal(err)
	}
	st, _ := reg.Store(def.Versions[0].GroupVersionResource())
	for i := 0; i < n; i++ {
		obj, err := decodeObject(fmt.Appendf(nil, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w%d"},"spec":{"size":%d,"color":"red"}}`, i, i))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := st.Create(context.Background(), "default", obj, WriteOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	return reg
}

// TestStorageVersionCostsNoMore guards that reading and writing a type in
// several versions through its storage version costs what a type in one
// version costs (allocations, which do not depend on the machine): values
// already in the storage version pass the converting storage untouched.
func TestStorageVersionCostsNoMore(t *testing.T) {
	ctx := context.Background()
	measure := func(versioned bool) (get, create float64) {
		reg := versionsBench(t, versioned, 10)
		st := versionStore(t, reg, "v1")
		get = testing.AllocsPerRun(100, func() {
			if _, err := st.Get(ctx, "default", "w3", ""); err != nil {
				t.Fatal(err)
			}
		})
		n := 0
		create = testing.AllocsPerRun(100, func() {
			n++
			if _, err := st.Create(ctx, "default", mustObject(t,
				fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"n%d"},"spec":{"size":1,"color":"red"}}`, n)), WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		return get, create
	}
	plainGet, plainCreate := measure(false)
	verGet, verCreate := measure(true)
	t.Logf("allocations: get %.0f plain, %.0f in the storage version of two; create %.0f and %.0f", plainGet, verGet, plainCreate, verCreate)
	if verGet > plainGet+1 {
		t.Errorf("a get through the storage version allocates %.0f times, a plain type's %.0f", verGet, plainGet)
	}
	if verCreate > plainCreate+2 {
		t.Errorf("a create through the storage version allocates %.0f times, a plain type's %.0f", verCreate, plainCreate)
	}
}

// BenchmarkVersionsGet reads one widget from storage (not the watch
// cache): plain, through the storage version of two, and through the
// other version (one decode, the conversion, one encode).
func BenchmarkVersionsGet(b *testing.B) {
	for _, c := range []struct {
		name      string
		versioned bool
		version   string
	}{{"plain", false, "v1"}, {"storage-version", true, "v1"}, {"converted", true, "v2"}} {
		b.Run(c.name, func(b *testing.B) {
			reg := versionsBench(b, c.versioned, 10)
			st, ok := reg.Store(meta.GroupVersionResource{Group: "example.dev", Version: c.version, Resource: "widgets"})
			if !ok {
				b.Fatal("not served")
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Get(ctx, "default", "w3", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
