package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// widgetV2 is a client's Go type for example.dev/v2 widgets, as a
// generated client would have it.
type widgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              widgetV2Spec   `json:"spec"`
	Status            widgetV2Status `json:"status,omitempty"`
}

type widgetV2Spec struct {
	Size       int64 `json:"size"`
	Appearance struct {
		Color  string `json:"color,omitempty"`
		Finish string `json:"finish,omitempty"`
	} `json:"appearance"`
	Replicas *int64   `json:"replicas,omitempty"`
	Tags     []string `json:"tags,omitempty"`
}

type widgetV2Status struct {
	Phase string `json:"phase,omitempty"`
}

type widgetV2List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []widgetV2 `json:"items"`
}

func (w *widgetV2) DeepCopyObject() runtime.Object     { return deepCopyJSON(w, &widgetV2{}) }
func (l *widgetV2List) DeepCopyObject() runtime.Object { return deepCopyJSON(l, &widgetV2List{}) }

func deepCopyJSON[T runtime.Object](in, out T) runtime.Object {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

var exampleV2 = schema.GroupVersion{Group: "example.dev", Version: "v2"}

// widgetV2Scheme knows widgetV2 as example.dev/v2 Widget.
func widgetV2Scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(exampleV2.WithKind("Widget"), &widgetV2{})
	scheme.AddKnownTypeWithName(exampleV2.WithKind("WidgetList"), &widgetV2List{})
	metav1.AddToGroupVersion(scheme, exampleV2)
	return scheme
}

// A typed REST client for v2 reads, lists, creates and updates widgets
// that v1 clients write, as Go values of its own type.
func TestWidgetVersionsTypedClient(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	dc := s.Dynamic(t)
	createNamespace(t, dc, "vt")
	cfg := s.RESTConfig(t)
	cfg.GroupVersion, cfg.APIPath, cfg.ContentType = &exampleV2, "/apis", "application/json"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(widgetV2Scheme(t)).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}

	w := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","annotations":{"example.dev/finish":"matte"}},"spec":{"size":2,"color":"red"}}`)
	if _, err := dc.Resource(widgetsGVR).Namespace("vt").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var a widgetV2
	if err := rc.Get().Namespace("vt").Resource("widgets").Name("a").Do(ctx).Into(&a); err != nil {
		t.Fatalf("typed get: %v", err)
	}
	// (Decoding into a Go type leaves TypeMeta empty, as client-go does.)
	if a.Spec.Size != 2 || a.Spec.Appearance.Color != "red" || a.Spec.Appearance.Finish != "matte" || len(a.Annotations) != 0 {
		t.Errorf("typed get of a v1-written widget: %+v", a)
	}

	b := widgetV2{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	b.Spec.Size, b.Spec.Appearance.Color, b.Spec.Appearance.Finish = 4, "green", "gloss"
	var created widgetV2
	if err := rc.Post().Namespace("vt").Resource("widgets").Body(&b).Do(ctx).Into(&created); err != nil {
		t.Fatalf("typed create: %v", err)
	}
	created.Spec.Appearance.Finish = "satin"
	var updated widgetV2
	if err := rc.Put().Namespace("vt").Resource("widgets").Name("b").Body(&created).Do(ctx).Into(&updated); err != nil {
		t.Fatalf("typed update: %v", err)
	}
	if updated.Spec.Appearance.Finish != "satin" || updated.Generation != 2 {
		t.Errorf("typed update answered %+v", updated)
	}
	v1, err := dc.Resource(widgetsGVR).Namespace("vt").Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if str(t, v1, "spec", "color") != "green" || v1.GetAnnotations()[finishAnnotation] != "satin" || v1.GetResourceVersion() != updated.ResourceVersion {
		t.Errorf("v1 form of the typed v2 update: %v annotations %v", v1.Object["spec"], v1.GetAnnotations())
	}

	var list widgetV2List
	if err := rc.Get().Namespace("vt").Resource("widgets").Do(ctx).Into(&list); err != nil {
		t.Fatalf("typed list: %v", err)
	}
	if len(list.Items) != 2 || list.Items[0].Spec.Appearance.Finish != "matte" || list.Items[1].Spec.Appearance.Color != "green" {
		t.Errorf("typed list: %+v", list.Items)
	}
}

// A controller-runtime manager whose cache (informer) watches v2 sees the
// widgets written through v1, in v2's form, and their changes.
func TestWidgetVersionsControllerRuntime(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	dc := s.Dynamic(t)
	createNamespace(t, dc, "vc")
	skipNameValidation := true // other tests in this process may name a controller alike
	mgr, err := ctrl.NewManager(s.RESTConfig(t), ctrl.Options{
		Scheme:                 widgetV2Scheme(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan widgetV2, 16)
	err = ctrl.NewControllerManagedBy(mgr).For(&widgetV2{}).Named("widgets-v2").Complete(
		reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var w widgetV2
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &w); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			seen <- w
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// wait returns the first state the reconciler reads that ok accepts.
	wait := func(what string, ok func(widgetV2) bool) widgetV2 {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case w := <-seen:
				if ok(w) {
					return w
				}
			case <-timeout:
				t.Fatalf("the v2 controller never saw %s", what)
			}
		}
	}
	widgets := dc.Resource(widgetsGVR).Namespace("vc")
	w := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","annotations":{"example.dev/finish":"matte"}},"spec":{"size":1,"color":"red"}}`)
	if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := wait("widget a", func(w widgetV2) bool { return w.Name == "a" })
	if got.Spec.Appearance.Color != "red" || got.Spec.Appearance.Finish != "matte" || len(got.Annotations) != 0 {
		t.Errorf("the v2 cache holds %+v", got)
	}
	if _, err := widgets.Patch(ctx, "a", "application/merge-patch+json", []byte(`{"spec":{"color":"blue"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the color written through v1", func(w widgetV2) bool { return w.Spec.Appearance.Color == "blue" })

	// The cache's client lists in v2 as well.
	var list widgetV2List
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace("vc")); err != nil || len(list.Items) != 1 || list.Items[0].Spec.Appearance.Finish != "matte" {
		t.Errorf("list from the v2 cache: %v %+v", err, list.Items)
	}
}
