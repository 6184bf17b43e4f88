package apiserver

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// Hooks select subresources as webhook rules do ("widgets" vs
// "widgets/*"): by default the main resource only. The server's own
// selfsubjectaccessreviews reach a hook only when it names them.
func TestAdmissionSelection(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{}
	recorder := func(name string, resources, subresources []string) registry.AdmissionHook {
		return registry.AdmissionHook{Name: name, SideEffects: registry.SideEffectsNone, Resources: resources, Subresources: subresources,
			Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
				if req.User == nil {
					return nil // the server's own writes
				}
				mu.Lock()
				defer mu.Unlock()
				what := req.Resource.Resource
				if req.Subresource != "" {
					what += "/" + req.Subresource
				}
				seen[name] = append(seen[name], what)
				return nil
			}}
	}
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec,
		recorder("default", nil, nil),
		recorder("all", nil, []string{"*"}),
		recorder("status", []string{"widgets.example.dev"}, []string{"status"}),
		recorder("scale", nil, []string{"scale"}),
		recorder("reviews", []string{"selfsubjectaccessreviews", "reviews"}, nil),
	)
	if r := call("POST", teamWidgets, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := call("PATCH", teamWidgets+"/w1/status", `{"status":{"phase":"up"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("status: %d %s", r.code, r.body)
	}
	if r := call("PATCH", teamWidgets+"/w1/scale", `{"spec":{"replicas":2}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("scale: %d %s", r.code, r.body)
	}
	if r := call("POST", teamWidgets+"/w1/restart", `{}`); r.code != 201 {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	if r := call("POST", reviewsPath, `{"spec":{"question":"q"}}`); r.code != 201 {
		t.Fatalf("review: %d %s", r.code, r.body)
	}
	if r := call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"spec":{"nonResourceAttributes":{"path":"/apis","verb":"get"}}}`); r.code != 201 {
		t.Fatalf("ssar: %d %s", r.code, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	// restart updates the widget through its Store: a main-resource update.
	want := map[string]string{
		"default": "widgets widgets reviews",
		"all":     "widgets widgets/status widgets/scale widgets/restart widgets reviews",
		"status":  "widgets/status",
		"scale":   "widgets/scale",
		"reviews": "reviews selfsubjectaccessreviews",
	}
	for name, w := range want {
		if got := strings.Join(seen[name], " "); got != w {
			t.Errorf("hook %s saw %q, want %q", name, got, w)
		}
	}
}
