package registry

import (
	"context"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// newBuiltinStore returns the store of res, registered alone on a fresh
// in-memory registry.
func newBuiltinStore(t *testing.T, res Resource) *Store {
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
	if err := reg.Register(res); err != nil {
		t.Fatal(err)
	}
	st, _ := reg.Store(res.GroupVersionResource())
	return st
}

// mustObject decodes a request body as the server does.
func mustObject(t *testing.T, js string) Object {
	t.Helper()
	obj, err := decodeObject([]byte(js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return obj
}

// wantStatus checks that err is a Status error with code and, when
// message is not empty, that message.
func wantStatus(t *testing.T, what string, err error, code int32, message string) *meta.StatusError {
	t.Helper()
	se, ok := meta.AsStatusError(err)
	if !ok {
		t.Fatalf("%s: got %v, want a %d Status", what, err, code)
	}
	if se.Status.Code != code || (message != "" && se.Status.Message != message) {
		t.Fatalf("%s: got %d %q, want %d %q", what, se.Status.Code, se.Status.Message, code, message)
	}
	return se
}

// causes lists the field and type of each cause of an Invalid error.
func causes(se *meta.StatusError) []string {
	var out []string
	if se.Status.Details != nil {
		for _, c := range se.Status.Details.Causes {
			out = append(out, c.Field+" "+string(c.Type))
		}
	}
	return out
}

// TestImmortalNamespaces: default, kube-system and kube-public may not be
// deleted (403, as NamespaceLifecycle answers), other namespaces may.
func TestImmortalNamespaces(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Namespaces())
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "other"} {
		if _, err := st.Create(ctx, "", Object{"metadata": map[string]any{"name": ns}}, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		for _, dry := range []bool{true, false} {
			_, err := st.Delete(ctx, "", ns, DeleteOptions{DryRun: dry})
			se := wantStatus(t, "delete "+ns, err, 403, `namespaces "`+ns+`" is forbidden: this namespace may not be deleted`)
			if se.Status.Reason != meta.StatusReasonForbidden || se.Status.Details.Name != ns || se.Status.Details.Kind != "namespaces" {
				t.Errorf("delete %s: %+v", ns, se.Status)
			}
		}
	}
	for _, ns := range []string{"kube-node-lease", "other"} {
		if _, err := st.Delete(ctx, "", ns, DeleteOptions{}); err != nil {
			t.Errorf("delete %s: %v", ns, err)
		}
	}
}
