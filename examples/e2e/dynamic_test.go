package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

var (
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgetsGVR    = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}
)

// obj builds an unstructured object from a JSON document.
func obj(t *testing.T, format string, args ...any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(fmt.Sprintf(format, args...))); err != nil {
		t.Fatalf("bad test object: %v", err)
	}
	return u
}

func widget(t *testing.T, ns, name string, size int) *unstructured.Unstructured {
	return obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget",
		"metadata":{"name":%q,"namespace":%q,"labels":{"app":"demo"}},
		"spec":{"size":%d,"color":"red","replicas":2,"tags":["a","b"],
		        "ports":[{"name":"http","port":80,"protocol":"TCP"}]}}`, name, ns, size)
}

func configMap(t *testing.T, ns, name string) *unstructured.Unstructured {
	return obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},
		"data":{"mode":"fast"},"binaryData":{"blob":%q}}`, name, ns, base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}))
}

func createNamespace(t *testing.T, dc dynamic.Interface, name string) *unstructured.Unstructured {
	t.Helper()
	ns, err := dc.Resource(namespacesGVR).Create(t.Context(),
		obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return ns
}

func str(t *testing.T, u *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedString(u.Object, fields...)
	if err != nil {
		t.Errorf("%s: %v", strings.Join(fields, "."), err)
	}
	if !found {
		return "<absent>"
	}
	return v
}

func num(t *testing.T, u *unstructured.Unstructured, fields ...string) int64 {
	t.Helper()
	v, found, err := unstructured.NestedInt64(u.Object, fields...)
	if err != nil || !found {
		t.Errorf("%s: found %v, %v (object %v)", strings.Join(fields, "."), found, err, u.Object)
	}
	return v
}

// statusError returns err as an API status error, failing the test otherwise.
func statusError(t *testing.T, err error) *apierrors.StatusError {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not an API Status", err, err)
	}
	return se
}

// wantCause checks that an Invalid error names field with the given cause type.
func wantCause(t *testing.T, err error, field string, typ metav1.CauseType) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	se := statusError(t, err)
	if se.ErrStatus.Code != http.StatusUnprocessableEntity {
		t.Errorf("code = %d, want 422", se.ErrStatus.Code)
	}
	if se.ErrStatus.Details == nil {
		t.Fatalf("Invalid status has no details: %+v", se.ErrStatus)
	}
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Field == field {
			if c.Type != typ {
				t.Errorf("cause on %s has type %q, want %q (%+v)", field, c.Type, typ, c)
			}
			return
		}
	}
	t.Errorf("no cause on field %q in %+v", field, se.ErrStatus.Details.Causes)
}

func TestDynamicConfigMaps(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()

	def, err := dc.Resource(namespacesGVR).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace default must exist at start: %v", err)
	}
	if got := str(t, def, "status", "phase"); got != "Active" {
		t.Errorf("namespace default: status.phase = %q, want Active", got)
	}
	ns := createNamespace(t, dc, "dyn-cm")
	if got := str(t, ns, "status", "phase"); got != "Active" {
		t.Errorf("new namespace: status.phase = %q, want Active", got)
	}
	if ns.GetUID() == "" || ns.GetResourceVersion() == "" || ns.GetNamespace() != "" {
		t.Errorf("new namespace: uid %q resourceVersion %q namespace %q; want uid and resourceVersion set, no namespace",
			ns.GetUID(), ns.GetResourceVersion(), ns.GetNamespace())
	}
	cms := dc.Resource(configmapsGVR).Namespace("dyn-cm")

	// create
	created, err := cms.Create(ctx, configMap(t, "dyn-cm", "settings"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" {
		t.Errorf("created configmap lacks uid or resourceVersion: %v", created.GetObjectKind())
	}
	if created.GetNamespace() != "dyn-cm" || created.GetName() != "settings" {
		t.Errorf("created configmap is %s/%s, want dyn-cm/settings", created.GetNamespace(), created.GetName())
	}
	if ts := created.GetCreationTimestamp(); ts.IsZero() || time.Since(ts.Time) > time.Minute || time.Until(ts.Time) > time.Minute {
		t.Errorf("creationTimestamp = %v, want about now", ts)
	}
	if got := str(t, created, "data", "mode"); got != "fast" {
		t.Errorf("data.mode = %q, want fast", got)
	}
	if got, want := str(t, created, "binaryData", "blob"), base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}); got != want {
		t.Errorf("binaryData.blob = %q, want %q", got, want)
	}
	if created.GetKind() != "ConfigMap" || created.GetAPIVersion() != "v1" {
		t.Errorf("created: kind %q apiVersion %q, want ConfigMap v1", created.GetKind(), created.GetAPIVersion())
	}

	// get
	got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() || str(t, got, "data", "mode") != "fast" {
		t.Errorf("get returned uid %s rv %s data %v; want what create returned (uid %s rv %s)",
			got.GetUID(), got.GetResourceVersion(), got.Object["data"], created.GetUID(), created.GetResourceVersion())
	}

	// list
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list configmaps: %v", err)
	}
	if list.GetResourceVersion() == "" {
		t.Errorf("list has no resourceVersion")
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "settings" || list.Items[0].GetUID() != created.GetUID() {
		t.Errorf("list items = %v, want just settings", names(list))
	}

	// update: resourceVersion changes, data changes
	upd := got.DeepCopy()
	if err := unstructured.SetNestedField(upd.Object, "slow", "data", "mode"); err != nil {
		t.Fatal(err)
	}
	updated, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update configmap: %v", err)
	}
	if updated.GetResourceVersion() == got.GetResourceVersion() {
		t.Errorf("update kept resourceVersion %s", got.GetResourceVersion())
	}
	if str(t, updated, "data", "mode") != "slow" || updated.GetUID() != created.GetUID() {
		t.Errorf("updated: data %v uid %s; want mode slow, same uid", updated.Object["data"], updated.GetUID())
	}
	again, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || str(t, again, "data", "mode") != "slow" || again.GetResourceVersion() != updated.GetResourceVersion() {
		t.Errorf("get after update: %v, data %v rv %s; want mode slow rv %s", err, again.Object["data"], again.GetResourceVersion(), updated.GetResourceVersion())
	}

	// update with the stale resourceVersion → 409 Conflict
	stale := got.DeepCopy()
	_ = unstructured.SetNestedField(stale.Object, "stale", "data", "mode")
	_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("update with stale resourceVersion %s: got %v, want 409 Conflict", got.GetResourceVersion(), err)
	}

	// PUT without resourceVersion is an unconditional update for configmaps
	unconditional := updated.DeepCopy()
	unconditional.SetResourceVersion("")
	_ = unstructured.SetNestedField(unconditional.Object, "unconditional", "data", "mode")
	u2, err := cms.Update(ctx, unconditional, metav1.UpdateOptions{})
	if err != nil {
		t.Errorf("PUT configmap without resourceVersion: %v, want success", err)
	} else if str(t, u2, "data", "mode") != "unconditional" || u2.GetResourceVersion() == updated.GetResourceVersion() {
		t.Errorf("PUT without resourceVersion: data %v rv %s", u2.Object["data"], u2.GetResourceVersion())
	}

	// PUT to a missing object → 404, nothing created
	missing := configMap(t, "dyn-cm", "missing")
	_, err = cms.Update(ctx, missing, metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("PUT to a missing configmap: got %v, want 404 NotFound", err)
	}
	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after PUT to a missing configmap, get: %v, want NotFound (PUT must not create)", err)
	}

	// get missing → 404 with the usual message and details
	_, err = cms.Get(ctx, "nothere", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get missing configmap: got %v, want NotFound", err)
	}
	if se := statusError(t, err); se.ErrStatus.Message != `configmaps "nothere" not found` ||
		se.ErrStatus.Details == nil || se.ErrStatus.Details.Name != "nothere" || se.ErrStatus.Details.Kind != "configmaps" {
		t.Errorf("get missing configmap: status %+v details %+v; want message `configmaps \"nothere\" not found`, details name nothere kind configmaps",
			se.ErrStatus, se.ErrStatus.Details)
	}

	// create duplicate → 409 AlreadyExists
	_, err = cms.Create(ctx, configMap(t, "dyn-cm", "settings"), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("create duplicate configmap: got %v, want AlreadyExists", err)
	} else if msg := err.Error(); msg != `configmaps "settings" already exists` {
		t.Errorf("create duplicate configmap: message %q, want `configmaps \"settings\" already exists`", msg)
	}

	// create in a missing namespace → 404 naming the namespace
	_, err = dc.Resource(configmapsGVR).Namespace("nope").Create(ctx, configMap(t, "nope", "x"), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("create in missing namespace: got %v, want NotFound", err)
	} else if !strings.Contains(err.Error(), `namespaces "nope" not found`) {
		t.Errorf("create in missing namespace: message %q, want it to say namespaces \"nope\" not found", err.Error())
	}

	// generateName
	gen, err := cms.Create(ctx, obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"},"data":{"k":"v"}}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with generateName: %v", err)
	}
	if !strings.HasPrefix(gen.GetName(), "gen-") || len(gen.GetName()) <= len("gen-") || gen.GetGenerateName() != "gen-" {
		t.Errorf("generateName gen-: name %q generateName %q", gen.GetName(), gen.GetGenerateName())
	}
	if _, err := cms.Get(ctx, gen.GetName(), metav1.GetOptions{}); err != nil {
		t.Errorf("get generated %s: %v", gen.GetName(), err)
	}
	gen2, err := cms.Create(ctx, obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"}}`), metav1.CreateOptions{})
	if err != nil || gen2.GetName() == gen.GetName() {
		t.Errorf("second generateName create: %v, name %q (first %q); want a different name", err, gen2.GetName(), gen.GetName())
	}

	// immutable: data, binaryData and immutable itself are frozen; metadata is not
	frozen, err := cms.Create(ctx, obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"frozen"},"data":{"k":"v"},"immutable":true}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create immutable configmap: %v", err)
	}
	if v, found, _ := unstructured.NestedBool(frozen.Object, "immutable"); !found || !v {
		t.Errorf("created configmap: immutable = %v (found %v), want true", v, found)
	}
	relabel := frozen.DeepCopy()
	relabel.SetLabels(map[string]string{"l": "1"})
	if frozen, err = cms.Update(ctx, relabel, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabel an immutable configmap: %v, want success (metadata may change)", err)
	}
	for _, c := range []struct {
		field  string
		mutate func(u *unstructured.Unstructured)
	}{
		{"data", func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, "w", "data", "k") }},
		{"binaryData", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString([]byte("x")), "binaryData", "b")
		}},
		{"immutable", func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, false, "immutable") }},
	} {
		changed := frozen.DeepCopy()
		c.mutate(changed)
		_, err := cms.Update(ctx, changed, metav1.UpdateOptions{})
		wantCause(t, err, c.field, metav1.CauseTypeForbidden)
	}
	if cur, err := cms.Get(ctx, "frozen", metav1.GetOptions{}); err != nil || str(t, cur, "data", "k") != "v" {
		t.Errorf("immutable configmap after refused updates: %v, data %v; want k=v", err, cur.Object["data"])
	}

	// delete
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete configmap: %v", err)
	}
	if _, err := cms.Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v, want NotFound", err)
	}
	list, err = cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after delete: %v", err)
	}
	for _, it := range list.Items {
		if it.GetName() == "settings" {
			t.Errorf("deleted configmap still listed")
		}
	}
}

func names(l *unstructured.UnstructuredList) []string {
	if l == nil {
		return nil
	}
	var out []string
	for _, it := range l.Items {
		out = append(out, it.GetNamespace()+"/"+it.GetName())
	}
	return out
}

func TestDynamicWidgets(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "dyn-wd")
	wds := dc.Resource(widgetsGVR).Namespace("dyn-wd")

	// create: status is dropped (status subresource), generation starts at 1
	in := widget(t, "dyn-wd", "w1", 3)
	in.Object["status"] = map[string]any{"phase": "Injected"}
	w, err := wds.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create widget: %v", err)
	}
	if w.GetKind() != "Widget" || w.GetAPIVersion() != "example.dev/v1" || w.GetUID() == "" || w.GetResourceVersion() == "" {
		t.Errorf("created widget: kind %q apiVersion %q uid %q rv %q", w.GetKind(), w.GetAPIVersion(), w.GetUID(), w.GetResourceVersion())
	}
	if w.GetGeneration() != 1 {
		t.Errorf("created widget: generation %d, want 1", w.GetGeneration())
	}
	if num(t, w, "spec", "size") != 3 || str(t, w, "spec", "color") != "red" || num(t, w, "spec", "replicas") != 2 {
		t.Errorf("created widget spec = %v", w.Object["spec"])
	}
	if tags, _, _ := unstructured.NestedStringSlice(w.Object, "spec", "tags"); strings.Join(tags, ",") != "a,b" {
		t.Errorf("spec.tags = %v, want [a b]", tags)
	}
	if ports, _, _ := unstructured.NestedSlice(w.Object, "spec", "ports"); len(ports) != 1 ||
		fmt.Sprint(ports[0]) != fmt.Sprint(map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}) {
		t.Errorf("spec.ports = %v, want [{name http port 80 protocol TCP}]", ports)
	}
	if _, found := w.Object["status"]; found {
		t.Errorf("create must ignore status when the status subresource is on; got status %v", w.Object["status"])
	}

	// generateName
	gen, err := wds.Create(ctx, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"generateName":"wd-"},"spec":{"size":1}}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create widget with generateName: %v", err)
	}
	if !strings.HasPrefix(gen.GetName(), "wd-") || len(gen.GetName()) <= len("wd-") {
		t.Errorf("generateName wd-: name %q", gen.GetName())
	}

	// get
	got, err := wds.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get widget: %v", err)
	}
	if got.GetResourceVersion() != w.GetResourceVersion() || num(t, got, "spec", "size") != 3 {
		t.Errorf("get widget: rv %s size %v, want rv %s size 3", got.GetResourceVersion(), got.Object["spec"], w.GetResourceVersion())
	}

	// list: items carry kind and apiVersion (in the raw response, not filled in by client-go)
	list, err := wds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list widgets: %v", err)
	}
	if len(list.Items) != 2 {
		t.Errorf("list widgets = %v, want w1 and %s", names(list), gen.GetName())
	}
	code, body := s.Do(t, "GET", "/apis/example.dev/v1/namespaces/dyn-wd/widgets", nil)
	var raw struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &raw); code != 200 || err != nil {
		t.Fatalf("GET widgets list: %d %v\n%s", code, err, body)
	}
	if raw.Kind != "WidgetList" || raw.APIVersion != "example.dev/v1" || raw.Metadata.ResourceVersion == "" || len(raw.Items) != 2 {
		t.Errorf("raw widget list: kind %q apiVersion %q rv %q items %d; want WidgetList example.dev/v1, a resourceVersion, 2 items",
			raw.Kind, raw.APIVersion, raw.Metadata.ResourceVersion, len(raw.Items))
	}
	for i, it := range raw.Items {
		if it.Kind != "Widget" || it.APIVersion != "example.dev/v1" {
			t.Errorf("raw list item %d: kind %q apiVersion %q, want Widget example.dev/v1", i, it.Kind, it.APIVersion)
		}
	}
	// an empty list has "items": [] (not null, not absent)
	code, body = s.Do(t, "GET", "/apis/example.dev/v1/namespaces/default/widgets", nil)
	if code != 200 || !strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"items":[]`) {
		t.Errorf("GET empty widget list: %d %s; want 200 with \"items\": []", code, body)
	}
	// label selector
	sel, err := wds.List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
	if err != nil || len(sel.Items) != 1 || sel.Items[0].GetName() != "w1" {
		t.Errorf("list widgets app=demo: %v %v, want just w1", err, names(sel))
	}

	// update spec: new resourceVersion, generation 2
	upd := got.DeepCopy()
	_ = unstructured.SetNestedField(upd.Object, int64(7), "spec", "size")
	updated, err := wds.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update widget: %v", err)
	}
	if updated.GetResourceVersion() == got.GetResourceVersion() || num(t, updated, "spec", "size") != 7 || updated.GetGeneration() != 2 {
		t.Errorf("updated widget: rv %s (was %s) size %v generation %d; want new rv, size 7, generation 2",
			updated.GetResourceVersion(), got.GetResourceVersion(), updated.Object["spec"], updated.GetGeneration())
	}
	// update metadata only: generation stays
	lbl := updated.DeepCopy()
	lbl.SetLabels(map[string]string{"app": "demo", "tier": "gold"})
	relabelled, err := wds.Update(ctx, lbl, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("relabel widget: %v", err)
	}
	if relabelled.GetGeneration() != 2 || relabelled.GetLabels()["tier"] != "gold" {
		t.Errorf("relabelled widget: generation %d labels %v; want generation 2 (metadata changes do not bump it), tier=gold",
			relabelled.GetGeneration(), relabelled.GetLabels())
	}

	// stale resourceVersion → 409
	_, err = wds.Update(ctx, got, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("update widget with stale resourceVersion %s: got %v, want Conflict", got.GetResourceVersion(), err)
	}

	// PUT without resourceVersion → 422 on metadata.resourceVersion
	norv := relabelled.DeepCopy()
	norv.SetResourceVersion("")
	_, err = wds.Update(ctx, norv, metav1.UpdateOptions{})
	wantCause(t, err, "metadata.resourceVersion", metav1.CauseTypeFieldValueInvalid)

	// PUT to a missing widget → 404, nothing created
	ghost := relabelled.DeepCopy()
	ghost.SetName("ghost")
	ghost.SetUID("")
	_, err = wds.Update(ctx, ghost, metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("PUT to a missing widget: got %v, want NotFound", err)
	}
	if _, err := wds.Get(ctx, "ghost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after PUT to a missing widget, get: %v, want NotFound", err)
	}

	// get missing
	_, err = wds.Get(ctx, "nothere", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get missing widget: %v, want NotFound", err)
	} else if se := statusError(t, err); se.ErrStatus.Message != `widgets.example.dev "nothere" not found` ||
		se.ErrStatus.Details == nil || se.ErrStatus.Details.Group != "example.dev" || se.ErrStatus.Details.Kind != "widgets" {
		t.Errorf("get missing widget: message %q details %+v; want `widgets.example.dev \"nothere\" not found`, group example.dev kind widgets",
			se.ErrStatus.Message, se.ErrStatus.Details)
	}

	// duplicate
	if _, err := wds.Create(ctx, widget(t, "dyn-wd", "w1", 1), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create duplicate widget: %v, want AlreadyExists", err)
	}
	// missing namespace
	if _, err := dc.Resource(widgetsGVR).Namespace("nope").Create(ctx, widget(t, "nope", "w", 1), metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create widget in missing namespace: %v, want NotFound", err)
	}

	// invalid objects → 422 with a cause on spec.size, nothing stored
	for _, c := range []struct {
		name string
		spec string
		typ  metav1.CauseType
	}{
		{"negative", `{"size":-1}`, metav1.CauseTypeFieldValueInvalid},
		{"missing", `{"color":"blue"}`, metav1.CauseTypeFieldValueRequired},
		{"wrongtype", `{"size":"big"}`, metav1.CauseTypeTypeInvalid},
	} {
		t.Run("invalid-"+c.name, func(t *testing.T) {
			_, err := wds.Create(ctx, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad-%s"},"spec":%s}`, c.name, c.spec), metav1.CreateOptions{})
			wantCause(t, err, "spec.size", c.typ)
			if _, err := wds.Get(ctx, "bad-"+c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("invalid widget was stored: get %v", err)
			}
		})
	}
	// an invalid update is refused too, and changes nothing
	bad := relabelled.DeepCopy()
	_ = unstructured.SetNestedField(bad.Object, int64(-5), "spec", "size")
	_, err = wds.Update(ctx, bad, metav1.UpdateOptions{})
	wantCause(t, err, "spec.size", metav1.CauseTypeFieldValueInvalid)
	if cur, err := wds.Get(ctx, "w1", metav1.GetOptions{}); err != nil || num(t, cur, "spec", "size") != 7 {
		t.Errorf("after a refused update: %v, spec %v; want size still 7", err, cur.Object["spec"])
	}

	// delete: 200 Status Success with details naming the object, then gone
	code, body = s.Do(t, "DELETE", "/apis/example.dev/v1/namespaces/dyn-wd/widgets/w1", nil)
	var st metav1.Status
	if err := json.Unmarshal(body, &st); code != 200 || err != nil {
		t.Fatalf("DELETE widget: %d %v\n%s", code, err, body)
	}
	if st.Kind != "Status" || st.Status != metav1.StatusSuccess || st.Details == nil ||
		st.Details.Name != "w1" || st.Details.Kind != "widgets" || st.Details.Group != "example.dev" || st.Details.UID != w.GetUID() {
		t.Errorf("DELETE widget answered %s; want Status Success with details name w1, kind widgets, group example.dev, uid %s", body, w.GetUID())
	}
	if _, err := wds.Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if err := wds.Delete(ctx, gen.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete %s with client-go: %v", gen.GetName(), err)
	}
	if list, err := wds.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("list after deleting every widget: %v %v, want none", err, names(list))
	}
}

func TestDynamicWidgetSubresources(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "dyn-sub")
	wds := dc.Resource(widgetsGVR).Namespace("dyn-sub")
	w, err := wds.Create(ctx, widget(t, "dyn-sub", "w", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create widget: %v", err)
	}

	// status: written through /status only
	w.Object["status"] = map[string]any{"phase": "Running", "replicas": int64(2), "selector": "app=demo"}
	withStatus, err := wds.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if str(t, withStatus, "status", "phase") != "Running" || withStatus.GetGeneration() != 1 {
		t.Errorf("after UpdateStatus: status %v generation %d; want phase Running, generation 1", withStatus.Object["status"], withStatus.GetGeneration())
	}
	// a status change through the main resource is ignored; a spec change through /status too
	main := withStatus.DeepCopy()
	main.Object["status"] = map[string]any{"phase": "Hacked"}
	_ = unstructured.SetNestedField(main.Object, "green", "spec", "color")
	afterMain, err := wds.Update(ctx, main, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update widget: %v", err)
	}
	if str(t, afterMain, "status", "phase") != "Running" || str(t, afterMain, "spec", "color") != "green" {
		t.Errorf("update of main resource: status %v color %q; want status kept (Running), color green", afterMain.Object["status"], str(t, afterMain, "spec", "color"))
	}
	viaStatus := afterMain.DeepCopy()
	_ = unstructured.SetNestedField(viaStatus.Object, "blue", "spec", "color")
	_ = unstructured.SetNestedField(viaStatus.Object, "Done", "status", "phase")
	afterStatus, err := wds.UpdateStatus(ctx, viaStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if str(t, afterStatus, "spec", "color") != "green" || str(t, afterStatus, "status", "phase") != "Done" {
		t.Errorf("update through /status: color %q phase %q; want spec kept (green), phase Done",
			str(t, afterStatus, "spec", "color"), str(t, afterStatus, "status", "phase"))
	}

	// scale: autoscaling/v1 Scale over spec.replicas, status.replicas, status.selector
	sc, err := wds.Get(ctx, "w", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if sc.GetKind() != "Scale" || sc.GetAPIVersion() != "autoscaling/v1" || sc.GetName() != "w" ||
		num(t, sc, "spec", "replicas") != 2 || num(t, sc, "status", "replicas") != 2 || str(t, sc, "status", "selector") != "app=demo" {
		t.Errorf("scale = %v; want autoscaling/v1 Scale w, spec.replicas 2, status.replicas 2, status.selector app=demo", sc.Object)
	}
	_ = unstructured.SetNestedField(sc.Object, int64(5), "spec", "replicas")
	if _, err := wds.Update(ctx, sc, metav1.UpdateOptions{}, "scale"); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	scaled, err := wds.Get(ctx, "w", metav1.GetOptions{})
	if err != nil || num(t, scaled, "spec", "replicas") != 5 {
		t.Errorf("after scaling to 5: %v, spec %v; want spec.replicas 5", err, scaled.Object["spec"])
	}
}

func TestDynamicWatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "dyn-watch")
	wds := dc.Resource(widgetsGVR).Namespace("dyn-watch")

	list, err := wds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := wds.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch widgets from %s: %v", list.GetResourceVersion(), err)
	}
	defer wi.Stop()

	w, err := wds.Create(ctx, widget(t, "dyn-watch", "w", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(w.Object, int64(2), "spec", "size")
	w2, err := wds.Update(ctx, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wds.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		typ  watch.EventType
		rv   string
		size int64
	}{{watch.Added, w.GetResourceVersion(), 1}, {watch.Modified, w2.GetResourceVersion(), 2}, {watch.Deleted, "", 2}}
	timeout := time.After(20 * time.Second)
	for i := 0; i < len(want); {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d events", i)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			u, isU := ev.Object.(*unstructured.Unstructured)
			if !isU {
				t.Fatalf("event %d: %s %T %v", i, ev.Type, ev.Object, ev.Object)
			}
			if ev.Type != want[i].typ || u.GetName() != "w" || u.GetKind() != "Widget" || num(t, u, "spec", "size") != want[i].size ||
				(want[i].rv != "" && u.GetResourceVersion() != want[i].rv) {
				t.Errorf("event %d: %s %s/%s rv %s spec %v; want %s w rv %q size %d",
					i, ev.Type, u.GetKind(), u.GetName(), u.GetResourceVersion(), u.Object["spec"], want[i].typ, want[i].rv, want[i].size)
			}
			i++
		case <-timeout:
			t.Fatalf("timed out waiting for watch event %d (%s)", i, want[i].typ)
		}
	}
}

// Namespaces are cleaned up in the library (kube-apiserver needs the
// controller-manager for it): deleting one removes its objects, then itself.
func TestDynamicNamespaceDeletion(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "doomed")
	if _, err := dc.Resource(configmapsGVR).Namespace("doomed").Create(ctx, configMap(t, "doomed", "c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(widgetsGVR).Namespace("doomed").Create(ctx, widget(t, "doomed", "w", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dc.Resource(namespacesGVR).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	// while it terminates, nothing new may be created in it
	if _, err := dc.Resource(configmapsGVR).Namespace("doomed").Create(ctx, configMap(t, "doomed", "late"), metav1.CreateOptions{}); err == nil {
		t.Errorf("created a configmap in a namespace being deleted")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dc.Resource(namespacesGVR).Get(ctx, "doomed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace still there 30s after delete (get: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, gvr := range []schema.GroupVersionResource{configmapsGVR, widgetsGVR} {
		l, err := dc.Resource(gvr).Namespace("doomed").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 0 {
			t.Errorf("%s left in the deleted namespace: %v %v", gvr.Resource, err, names(l))
		}
	}
}
