package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// typeRecorder records the media type of every response a client receives,
// to prove what went over the wire.
type typeRecorder struct {
	mu    sync.Mutex
	types map[string]int
}

func (r *typeRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if s := resp.Header.Get("Content-Type"); strings.Contains(s, "stream=watch") {
				mt += ";stream=watch"
			}
			r.mu.Lock()
			if r.types == nil {
				r.types = map[string]int{}
			}
			r.types[mt]++
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *typeRecorder) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.types {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return watch.Event{}
}

// client-go's typed clientset with protobuf only, both ways: every request
// body and every response (errors and watch streams included) is protobuf.
func TestProtobufTypedClient(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cfg := s.RESTConfig(t)
	cfg.ContentType = protobufType
	cfg.AcceptContentTypes = protobufType
	rec := &typeRecorder{}
	cfg.WrapTransport = rec.wrap
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pb", Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Labels["kubernetes.io/metadata.name"] != "pb" {
		t.Fatalf("namespace %+v", ns)
	}
	cms := cs.CoreV1().ConfigMaps("pb")
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	immutable := false
	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "café"}},
		Data:       map[string]string{"mode": "fast", "empty": ""},
		BinaryData: map[string][]byte{"blob": {0, 1, 2, 255}},
		Immutable:  &immutable,
	}, metav1.CreateOptions{FieldManager: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() || created.Data["mode"] != "fast" ||
		!bytes.Equal(created.BinaryData["blob"], []byte{0, 1, 2, 255}) || created.Immutable == nil || *created.Immutable ||
		len(created.ManagedFields) != 1 || created.ManagedFields[0].Manager != "e2e" || created.ManagedFields[0].FieldsV1 == nil {
		t.Fatalf("created %+v", created)
	}
	got, err := cms.Get(ctx, "one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Annotations["note"] != "café" || got.Data["empty"] != "" {
		t.Fatalf("got %+v", got)
	}
	got.Data["mode"] = "slow"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || updated.Data["mode"] != "slow" {
		t.Fatalf("update: %v %+v", err, updated)
	}
	patched, err := cms.Patch(ctx, "one", types.StrategicMergePatchType, []byte(`{"data":{"extra":"1"}}`), metav1.PatchOptions{})
	if err != nil || patched.Data["extra"] != "1" {
		t.Fatalf("patch: %v %+v", err, patched)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Continue == "" || list.RemainingItemCount == nil || *list.RemainingItemCount != 1 || list.ResourceVersion == "" {
		t.Fatalf("list %+v", list.ListMeta)
	}
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Added, "one"}, {watch.Modified, "one"}, {watch.Modified, "one"}, {watch.Added, "two"}} {
		ev := nextEvent(t, w)
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != want.typ || !ok || cm.Name != want.name {
			t.Fatalf("event %s %T, want %s %s", ev.Type, ev.Object, want.typ, want.name)
		}
	}
	// Errors arrive as protobuf Statuses and keep their meaning.
	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create twice: %v", err)
	}
	// Deletes send DeleteOptions as protobuf.
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Deleted {
		t.Fatalf("event %s", ev.Type)
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := rec.snapshot()
	for mt := range seen {
		if mt != protobufType && mt != protobufType+";stream=watch" {
			t.Errorf("a response was %s; all: %v", mt, seen)
		}
	}
	if seen[protobufType+";stream=watch"] == 0 {
		t.Errorf("no protobuf watch stream seen: %v", seen)
	}
}

// client-go's metadata client and a metadata informer, on a custom resource
// (PartialObjectMetadata is protobuf even where the type has no message)
// and on configmaps.
func TestMetadataClientAndInformer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cfg := s.RESTConfig(t)
	rec := &typeRecorder{}
	cfg.WrapTransport = rec.wrap
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "md")
	wds := dc.Resource(widgetsGVR).Namespace("md")
	if _, err := wds.Create(ctx, widget(t, "md", "w1", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, "md", nil)
	inf := factory.ForResource(widgetsGVR).Informer()
	var mu sync.Mutex
	var events []string
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			m := obj.(*metav1.PartialObjectMetadata)
			mu.Lock()
			events = append(events, "add "+m.Name+" "+m.Labels["app"])
			mu.Unlock()
		},
		UpdateFunc: func(_, obj any) {
			m := obj.(*metav1.PartialObjectMetadata)
			mu.Lock()
			events = append(events, "update "+m.Name+" "+m.Labels["app"])
			mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m := obj.(*metav1.PartialObjectMetadata)
			mu.Lock()
			events = append(events, "delete "+m.Name)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	m := mc.Resource(widgetsGVR).Namespace("md")
	pom, err := m.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pom.Name != "w1" || pom.Labels["app"] != "demo" || pom.Generation != 1 || pom.UID == "" || pom.CreationTimestamp.IsZero() {
		t.Fatalf("metadata get %+v", pom)
	}
	if _, err := wds.Create(ctx, widget(t, "md", "w2", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 || list.ResourceVersion == "" {
		t.Fatalf("metadata list: %v %+v", err, list)
	}
	patched, err := m.Patch(ctx, "w2", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["app"] != "other" {
		t.Fatalf("metadata patch: %v %+v", err, patched)
	}
	if err := m.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get deleted: %v", err)
	}
	want := []string{"add w1 demo", "add w2 demo", "update w2 other", "delete w1"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), events...)
		mu.Unlock()
		if strings.Join(got, ",") == strings.Join(want, ",") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("informer saw %q, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A metadata watch on configmaps, the built-in type.
	cmw, err := mc.Resource(configmapsGVR).Namespace("md").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cmw.Stop()
	if _, err := dc.Resource(configmapsGVR).Namespace("md").Create(ctx, configMap(t, "md", "c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, cmw)
	if p, ok := ev.Object.(*metav1.PartialObjectMetadata); ev.Type != watch.Added || !ok || p.Name != "c1" {
		t.Fatalf("configmap metadata event %s %#v", ev.Type, ev.Object)
	}
	if seen := rec.snapshot(); seen[protobufType] == 0 || seen[protobufType+";stream=watch"] == 0 {
		t.Fatalf("the metadata client did not get protobuf: %v", seen)
	}
}

// kubectl get shows the printer columns of v1 widgets (Size, Color, Phase,
// Age) and of configmaps, from the server's Table.
func TestKubectlGetTable(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "tb")
	wds := dc.Resource(widgetsGVR).Namespace("tb")
	w1, err := wds.Create(ctx, widget(t, "tb", "w1", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(w1.Object, "Running", "status", "phase")
	if _, err := wds.UpdateStatus(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w2 := widget(t, "tb", "w2", 5)
	unstructured.RemoveNestedField(w2.Object, "spec", "color")
	if _, err := wds.Create(ctx, w2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := s.MustKubectl(t, "get", "widgets.v1.example.dev", "-n", "tb")
	if !regexp.MustCompile(`^NAME\s+SIZE\s+COLOR\s+PHASE\s+AGE\n`).MatchString(out) {
		t.Fatalf("header of\n%s", out)
	}
	rows := parseTable(t, out)
	age := regexp.MustCompile(`^\d+s$`)
	if len(rows) != 2 || rows[0]["NAME"] != "w1" || rows[0]["SIZE"] != "3" || rows[0]["COLOR"] != "red" || rows[0]["PHASE"] != "Running" || !age.MatchString(rows[0]["AGE"]) ||
		rows[1]["NAME"] != "w2" || rows[1]["SIZE"] != "5" || rows[1]["COLOR"] != "" || rows[1]["PHASE"] != "" { // blank, as with kube-apiserver
		t.Fatalf("kubectl get widgets:\n%s", out)
	}
	if _, err := dc.Resource(configmapsGVR).Namespace("tb").Create(ctx, configMap(t, "tb", "c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out = s.MustKubectl(t, "get", "configmaps", "-n", "tb")
	rows = parseTable(t, out)
	if len(rows) != 1 || rows[0]["NAME"] != "c1" || rows[0]["DATA"] != "2" || !age.MatchString(rows[0]["AGE"]) {
		t.Fatalf("kubectl get configmaps:\n%s", out)
	}
	// One object, and without headers.
	out = s.MustKubectl(t, "get", "widgets.v1.example.dev", "w1", "-n", "tb", "--no-headers")
	if !regexp.MustCompile(`^w1\s+3\s+red\s+Running\s+\d+s\n$`).MatchString(out) {
		t.Fatalf("kubectl get widget w1 --no-headers:\n%s", out)
	}
}

// kubectl get configmaps -w prints the current configmaps, then each change
// as it comes (a Table watch).
func TestKubectlWatchConfigMaps(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	createNamespace(t, dc, "cw")
	cms := dc.Resource(configmapsGVR).Namespace("cw")
	if _, err := cms.Create(ctx, configMap(t, "cw", "first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect := kubectlStream(t, s, "get", "configmaps", "-n", "cw", "-w")
	expect(`^NAME\s+DATA\s+AGE$`)
	expect(`^first\s+2\s+\d+s$`)
	second := configMap(t, "cw", "second")
	if _, err := cms.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(`^second\s+2\s+\d+s$`)
	if _, err := cms.Patch(ctx, "second", types.MergePatchType, []byte(`{"data":{"more":"x"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(`^second\s+3\s+\d+s$`)
}

// A stock net/http client with compression on receives large lists
// gzip-compressed and decompresses them transparently; small responses are
// not compressed.
func TestGzipStockClient(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc := s.Dynamic(t)
	ctx := t.Context()
	big := strings.Repeat("x", 60<<10)
	for i := range 3 {
		cm := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big%d","namespace":"default"},"data":{"k":%q}}`, i, big)
		if _, err := dc.Resource(configmapsGVR).Namespace("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := s.RESTConfig(t)
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, transport *http.Transport) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		resp, err := (&http.Client{Transport: transport}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// The default: Go asks for gzip itself and decompresses.
	resp := get("/api/v1/namespaces/default/configmaps", &http.Transport{TLSClientConfig: tlsConfig})
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.ConfigMapList
	if !resp.Uncompressed || json.Unmarshal(body, &list) != nil || len(list.Items) != 3 || list.Items[2].Data["k"] != big {
		t.Fatalf("uncompressed=%v, %d bytes", resp.Uncompressed, len(body))
	}
	// What went over the wire.
	raw := &http.Transport{TLSClientConfig: tlsConfig, DisableCompression: true}
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/namespaces/default/configmaps", nil)
	req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	req.Header.Set("Accept-Encoding", "gzip")
	rr, err := (&http.Client{Transport: raw}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Body.Close()
	n, _ := io.Copy(io.Discard, rr.Body)
	if rr.Header.Get("Content-Encoding") != "gzip" || rr.Header.Get("Vary") != "Accept-Encoding" || n >= int64(len(body))/10 {
		t.Fatalf("wire: %v, %d bytes for %d", rr.Header, n, len(body))
	}
	small := get("/api/v1/namespaces/default", &http.Transport{TLSClientConfig: tlsConfig})
	if small.Uncompressed || small.Header.Get("Content-Encoding") != "" {
		t.Fatalf("small response compressed: %v", small.Header)
	}
}
