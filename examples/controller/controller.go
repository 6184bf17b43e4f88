package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// fieldManager is the controller's name in managedFields.
	fieldManager = "widget-controller"
	// finalizer keeps a Widget until its published record is removed.
	finalizer = "example.dev/unpublish"
	// widgetLabel marks the ConfigMaps the controller renders.
	widgetLabel = "example.dev/widget"

	conditionReady     = "Ready"
	conditionConfigMap = "ConfigMapApplied"
)

// newScheme knows the built-in types (ConfigMaps) and Widgets.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := addToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// newManager returns a controller-runtime manager running the Widget
// controller against cfg. publishDir is the "external system" the
// finalizer cleans up: one JSON file per ready Widget.
func newManager(cfg *rest.Config, scheme *runtime.Scheme, publishDir string) (ctrl.Manager, error) {
	if err := os.MkdirAll(publishDir, 0o755); err != nil {
		return nil, err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"}, // no listener of its own
		HealthProbeBindAddress: "0",
		// Controller names must be unique per process; a new manager in the
		// same process (the restart test) registers the same name again.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, err
	}
	r := &WidgetReconciler{Client: mgr.GetClient(), PublishDir: publishDir}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&Widget{}).
		Owns(&corev1.ConfigMap{}). // a change to a rendered ConfigMap reconciles its Widget
		Named("widget").
		Complete(r)
	if err != nil {
		return nil, err
	}
	return mgr, nil
}

// WidgetReconciler renders each Widget into a ConfigMap it owns, publishes
// a record of it to PublishDir, and reports what it did in the Widget's
// status.
type WidgetReconciler struct {
	client.Client
	PublishDir string
}

// Reconcile brings one Widget's ConfigMap, published record and status in
// line with its spec.
func (r *WidgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var w Widget
	if err := r.Get(ctx, req.NamespacedName, &w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !w.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&w, finalizer) {
			return ctrl.Result{}, nil
		}
		before := w.DeepCopy()
		w.Status.Phase = "Deleting"
		r.setCondition(&w, conditionReady, metav1.ConditionFalse, "Deleting", "the widget is being unpublished")
		if err := r.patchStatus(ctx, &w, before); err != nil {
			return ctrl.Result{}, err
		}
		// Clean up outside the API, then let the deletion finish. The
		// ConfigMap is not deleted here: its ownerReference makes the
		// server's garbage collector delete it.
		if err := r.unpublish(&w); err != nil {
			return ctrl.Result{}, err
		}
		// With the optimistic lock the patch carries resourceVersion: a
		// finalizer another controller added meanwhile is not dropped (the
		// patch conflicts and the request is retried).
		patch := client.MergeFromWithOptions(w.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(&w, finalizer)
		if err := r.Patch(ctx, &w, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		logger.Info("unpublished the widget; deletion may proceed")
		return ctrl.Result{}, nil
	}

	if !controllerutil.ContainsFinalizer(&w, finalizer) {
		patch := client.MergeFromWithOptions(w.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(&w, finalizer)
		if err := r.Patch(ctx, &w, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := w.DeepCopy()
	w.Status.ObservedGeneration = w.Generation
	if w.Spec.Paused {
		w.Status.Phase = "Paused"
		r.setCondition(&w, conditionReady, metav1.ConditionFalse, "Paused", "spec.paused is set; the ConfigMap is not updated")
		return ctrl.Result{}, r.patchStatus(ctx, &w, before)
	}

	cmName := "widget-" + w.Name
	if err := r.applyConfigMap(ctx, &w, cmName); err != nil {
		w.Status.Phase = "Pending"
		r.setCondition(&w, conditionConfigMap, metav1.ConditionFalse, "ApplyFailed", err.Error())
		r.setCondition(&w, conditionReady, metav1.ConditionFalse, "ApplyFailed", "the ConfigMap could not be applied")
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, &w, before))
	}
	if err := r.publish(&w); err != nil {
		return ctrl.Result{}, err
	}
	w.Status.Phase = "Ready"
	w.Status.ConfigMap = cmName
	r.setCondition(&w, conditionConfigMap, metav1.ConditionTrue, "Applied", "ConfigMap "+cmName+" is up to date")
	r.setCondition(&w, conditionReady, metav1.ConditionTrue, "Reconciled", fmt.Sprintf("a %s widget of size %d", w.Spec.Color, w.Spec.Size))
	return ctrl.Result{}, r.patchStatus(ctx, &w, before)
}

func (r *WidgetReconciler) setCondition(w *Widget, typ string, status metav1.ConditionStatus, reason, message string) {
	apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: w.Generation,
	})
}

// patchStatus writes the status subresource when it changed.
func (r *WidgetReconciler) patchStatus(ctx context.Context, w, before *Widget) error {
	if equalStatus(w.Status, before.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, w, client.MergeFrom(before)))
}

func equalStatus(a, b WidgetStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// applyConfigMap renders w into the ConfigMap name with server-side apply:
// the controller declares the fields it owns (data, labels, the owner
// reference) and takes them back if someone else changed them.
func (r *WidgetReconciler) applyConfigMap(ctx context.Context, w *Widget, name string) error {
	cm := corev1ac.ConfigMap(name, w.Namespace).
		WithLabels(map[string]string{widgetLabel: w.Name, "app.kubernetes.io/managed-by": fieldManager}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(GroupVersion.String()).
			WithKind("Widget").
			WithName(w.Name).
			WithUID(w.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithData(map[string]string{
			"color":      w.Spec.Color,
			"size":       fmt.Sprint(w.Spec.Size),
			"message":    w.Spec.Message,
			"widget.txt": render(w),
		})
	return r.Apply(ctx, cm, client.FieldOwner(fieldManager), client.ForceOwnership)
}

// render is the widget as text: one row of size characters.
func render(w *Widget) string {
	glyph := map[string]string{"red": "R", "green": "G", "blue": "B"}[w.Spec.Color]
	if glyph == "" {
		glyph = "#"
	}
	row := ""
	for range w.Spec.Size {
		row += glyph
	}
	if w.Spec.Message != "" {
		row += " " + w.Spec.Message
	}
	return row + "\n"
}

// publishedRecord is what the controller writes to the external system.
type publishedRecord struct {
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	UID        string     `json:"uid"`
	Generation int64      `json:"generation"`
	Spec       WidgetSpec `json:"spec"`
}

func (r *WidgetReconciler) recordPath(w *Widget) string {
	return filepath.Join(r.PublishDir, w.Namespace+"_"+w.Name+".json")
}

func (r *WidgetReconciler) publish(w *Widget) error {
	b, err := json.MarshalIndent(publishedRecord{Namespace: w.Namespace, Name: w.Name, UID: string(w.UID), Generation: w.Generation, Spec: w.Spec}, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.recordPath(w) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.recordPath(w))
}

func (r *WidgetReconciler) unpublish(w *Widget) error {
	if err := os.Remove(r.recordPath(w)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
