package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kapi-dev/kapi/apiserver/registry"
	kapimeta "github.com/kapi-dev/kapi/meta"
)

// GroupVersion is the API group and version of Widgets.
var GroupVersion = schema.GroupVersion{Group: "example.dev", Version: "v1"}

// WidgetSpec is the desired state of a Widget. The same struct is what kapi
// derives the OpenAPI schema from (json tags, kapi markers, doc tags) and
// what the controller decodes.
type WidgetSpec struct {
	Size    int64  `json:"size" kapi:"required,min=1,max=100" doc:"Size of the widget, 1 to 100."`
	Color   string `json:"color,omitempty" kapi:"enum=red|green|blue,default=blue" doc:"Color of the widget."`
	Message string `json:"message,omitempty" kapi:"maxLength=256" doc:"Text printed on the widget."`
	Paused  bool   `json:"paused,omitempty" doc:"Stop reconciling: the ConfigMap is left as it is."`
}

// WidgetStatus is what the controller observed and did (its schema, with
// the documentation, is widgetSchemaStatus).
type WidgetStatus struct {
	Phase              string             `json:"phase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	ConfigMap          string             `json:"configMap,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is the controller's view of an example.dev/v1 Widget: a regular
// Kubernetes-style Go type (metav1.ObjectMeta, DeepCopyObject) as
// controller-runtime expects.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyInto copies w into out.
func (w *Widget) DeepCopyInto(out *Widget) {
	*out = *w // TypeMeta and Spec hold only values
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if w.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(w.Status.Conditions))
		for i := range w.Status.Conditions {
			w.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of w.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	if c := w.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &WidgetList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// addToScheme registers Widget and WidgetList with a client-go scheme.
func addToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// widgetSchemaType is the server's side of the same type: kapi's
// registry.ForType wants kapi's own TypeMeta and ObjectMeta; the spec is
// shared with Widget, and the status has the same JSON as WidgetStatus.
type widgetSchemaType struct {
	kapimeta.TypeMeta `json:",inline"`
	Metadata          kapimeta.ObjectMeta `json:"metadata"`
	Spec              WidgetSpec          `json:"spec" kapi:"required"`
	Status            widgetSchemaStatus  `json:"status,omitempty"`
}

// widgetSchemaStatus is WidgetStatus with kapi markers on the conditions,
// which metav1.Condition does not carry (the keys of a map-type list must be
// required).
type widgetSchemaStatus struct {
	Phase              string            `json:"phase,omitempty" kapi:"enum=Pending|Ready|Paused|Deleting" doc:"Pending, Ready, Paused or Deleting."`
	ObservedGeneration int64             `json:"observedGeneration,omitempty" doc:"The metadata.generation the status describes."`
	ConfigMap          string            `json:"configMap,omitempty" doc:"Name of the ConfigMap the controller renders the widget into."`
	Conditions         []schemaCondition `json:"conditions,omitempty" kapi:"listType=map,listMapKeys=type" doc:"Ready and ConfigMapApplied."`
}

// schemaCondition is the JSON of metav1.Condition.
type schemaCondition struct {
	Type               string        `json:"type" kapi:"required,maxLength=316"`
	Status             string        `json:"status" kapi:"required,enum=True|False|Unknown"`
	ObservedGeneration int64         `json:"observedGeneration,omitempty" kapi:"min=0"`
	LastTransitionTime kapimeta.Time `json:"lastTransitionTime" kapi:"required"`
	Reason             string        `json:"reason" kapi:"required,maxLength=1024"`
	Message            string        `json:"message" kapi:"required,maxLength=32768"`
}

// widgetResource is the registration of example.dev/v1 widgets with kapi.
func widgetResource() (registry.Resource, error) {
	return registry.ForType[widgetSchemaType](registry.Resource{
		Group:        GroupVersion.Group,
		Version:      GroupVersion.Version,
		Resource:     "widgets",
		Kind:         "Widget",
		ShortNames:   []string{"wd"},
		Namespaced:   true,
		Subresources: registry.Subresources{Status: true},
		PrinterColumns: []registry.Column{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
			{Name: "Color", Type: "string", JSONPath: ".spec.color"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	})
}
