package main

import (
	"context"
	"maps"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// WidgetV2 is a Widget in example.dev/v2: v1's spec.color moves into
// spec.appearance.color, and spec.appearance.finish is new. v1 has no field
// for the finish, so the v1 form of a widget keeps it in the annotation
// example.dev/finish; a widget converted to v1 and back to v2 (or to v2 and
// back to v1) loses nothing.
type WidgetV2 struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpecV2    `json:"spec" kapi:"required"`
	Status        *WidgetStatus   `json:"status,omitempty"`
}

// WidgetSpecV2 is the desired state of a Widget in v2.
type WidgetSpecV2 struct {
	Size int64 `json:"size" kapi:"required,min=0" doc:"Size of the widget."`
	// Always present (defaulted to {}), so that v2 has one form for "no
	// appearance" and a round trip through v1, which cannot tell absent
	// from empty, gives it back.
	Appearance WidgetAppearance `json:"appearance" kapi:"default={}" doc:"How the widget looks."`
	Replicas   *int64           `json:"replicas,omitempty" doc:"Desired number of replicas."`
	Tags       []string         `json:"tags,omitzero" kapi:"listType=set" doc:"Tags of the widget."`
	Ports      []WidgetPort     `json:"ports,omitzero" kapi:"listType=map,listMapKeys=name" doc:"Ports the widget serves."`
}

// WidgetAppearance is how a widget looks.
type WidgetAppearance struct {
	Color  *string `json:"color,omitempty" doc:"Color of the widget (spec.color in v1)."`
	Finish *string `json:"finish,omitempty" doc:"Surface finish of the widget, e.g. matte or gloss (v1 keeps it in the annotation example.dev/finish)."`
}

// finishAnnotation holds spec.appearance.finish in the v1 form of a
// widget. It belongs to the conversion: v2 objects never show it, and a v2
// write that sets it is refused (it would be lost on the way through v1).
const finishAnnotation = "example.dev/finish"

// widgetsV2 is example.dev/v2 widgets: its own columns and selectable
// fields, the same status and scale subresources as v1, and the custom
// subresources restart, log and health served in v2 too.
func widgetsV2() (registry.Resource, error) {
	custom, err := widgetSubresources("v2")
	if err != nil {
		return registry.Resource{}, err
	}
	res := widgetResource("v2")
	res.Subresources = registry.Subresources{Status: true, Scale: widgetScale(), Custom: custom}
	// kubectl get widgets.v2.example.dev --field-selector spec.appearance.finish=matte
	res.SelectableFields = []string{".spec.appearance.color", ".spec.appearance.finish", ".status.phase"}
	res.PrinterColumns = []registry.Column{
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Color", Type: "string", JSONPath: ".spec.appearance.color"},
		{Name: "Finish", Type: "string", JSONPath: ".spec.appearance.finish"},
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	res.Strategy.Validate = validateWidgetV2
	return registry.ForType[WidgetV2](res)
}

// validateWidgetV2 refuses the annotation that carries the finish in v1: in
// v2 the finish is spec.appearance.finish.
func validateWidgetV2(_ context.Context, obj registry.Object) meta.ErrorList {
	if _, ok, _ := meta.NestedField(obj, "metadata", "annotations", finishAnnotation); ok {
		return meta.ErrorList{meta.Forbidden(meta.NewPath("metadata", "annotations").Key(finishAnnotation),
			"is reserved for the v1 form of a widget; in example.dev/v2 set spec.appearance.finish")}
	}
	return nil
}

// widgetV2ToV1 converts a v2 widget to v1 (the hub): the finish goes into
// the annotation.
func widgetV2ToV1(src *WidgetV2, dst *Widget) error {
	dst.Metadata = src.Metadata
	dst.Spec = WidgetSpec{Size: src.Spec.Size, Color: src.Spec.Appearance.Color, Replicas: src.Spec.Replicas,
		Tags: src.Spec.Tags, Ports: src.Spec.Ports}
	dst.Status = src.Status
	// The annotation is there exactly when v2 has a finish.
	_, annotated := src.Metadata.Annotations[finishAnnotation]
	if f := src.Spec.Appearance.Finish; f != nil || annotated {
		ann := maps.Clone(src.Metadata.Annotations)
		if f != nil {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[finishAnnotation] = *f
		} else {
			delete(ann, finishAnnotation)
		}
		dst.Metadata.Annotations = ann
	}
	return nil
}

// widgetV1ToV2 converts a v1 widget (the hub) to v2: the finish comes out
// of the annotation.
func widgetV1ToV2(src *Widget, dst *WidgetV2) error {
	dst.Metadata = src.Metadata
	dst.Spec = WidgetSpecV2{Size: src.Spec.Size, Appearance: WidgetAppearance{Color: src.Spec.Color},
		Replicas: src.Spec.Replicas, Tags: src.Spec.Tags, Ports: src.Spec.Ports}
	dst.Status = src.Status
	if f, ok := src.Metadata.Annotations[finishAnnotation]; ok {
		dst.Spec.Appearance.Finish = &f
		ann := maps.Clone(src.Metadata.Annotations)
		delete(ann, finishAnnotation)
		dst.Metadata.Annotations = ann
	}
	return nil
}
