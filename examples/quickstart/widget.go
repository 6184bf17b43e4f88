package main

import (
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Widget is the example custom type in example.dev/v1 (WidgetV2 in
// widget_v2.go is example.dev/v2): a typed Go struct whose schema kapi
// derives from the json tags and kapi markers. Optional fields are pointers
// and lists omitzero, so that an object converted to v2 and back keeps the
// difference between an absent field and an empty one (the schema is the
// same either way).
type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
	Status        *WidgetStatus   `json:"status,omitempty"`
}

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	Size     int64        `json:"size" kapi:"required,min=0" doc:"Size of the widget."`
	Color    *string      `json:"color,omitempty" doc:"Color of the widget."`
	Replicas *int64       `json:"replicas,omitempty" doc:"Desired number of replicas."`
	Tags     []string     `json:"tags,omitzero" kapi:"listType=set" doc:"Tags of the widget."`
	Ports    []WidgetPort `json:"ports,omitzero" kapi:"listType=map,listMapKeys=name" doc:"Ports the widget serves."`
}

// WidgetPort is one named port.
type WidgetPort struct {
	Name     string  `json:"name" kapi:"required"`
	Port     int64   `json:"port" kapi:"required"`
	Protocol *string `json:"protocol,omitempty"`
}

// WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	Replicas *int64  `json:"replicas,omitempty"`
	Phase    *string `json:"phase,omitempty"`
	Selector *string `json:"selector,omitempty"`
}

// widgetVersions is the registration of widgets: example.dev/v1 exactly as
// it was before v2 existed (its objects stay stored as they are, so a data
// directory needs no migration) and example.dev/v2 (widget_v2.go), written
// in storage (v1 by default, or v2). v1 is the hub: with v1 stored, a v2
// object is converted to v1 when it is written and back when it is read.
// With v2 stored, writes are converted to v2, and the migration controller
// rewrites the objects still stored in v1.
func widgetVersions(storage string) (registry.Versions, error) {
	v1, err := widgetsV1()
	if err != nil {
		return registry.Versions{}, err
	}
	v2, err := widgetsV2()
	if err != nil {
		return registry.Versions{}, err
	}
	return registry.Versions{
		Versions: []registry.Resource{v1, v2},
		Storage:  storage,
		Conversion: registry.Conversion{Hub: "v1", Spokes: map[string]registry.Spoke{
			"v2": registry.TypedSpoke(widgetV2ToV1, widgetV1ToV2),
		}},
	}, nil
}

// widgetResource is what every version of widgets shares.
func widgetResource(version string) registry.Resource {
	return registry.Resource{
		Group:      "example.dev",
		Version:    version,
		Resource:   "widgets",
		Kind:       "Widget",
		ShortNames: []string{"wd"},
		Categories: []string{"all"},
		Namespaced: true,
	}
}

// widgetScale is the scale subresource of every version.
func widgetScale() *registry.Scale {
	return &registry.Scale{
		SpecReplicasPath:   ".spec.replicas",
		StatusReplicasPath: ".status.replicas",
		LabelSelectorPath:  ".status.selector",
	}
}

// widgetsV1 is example.dev/v1 widgets, with the custom subresources
// restart, log and health (extension.go).
func widgetsV1() (registry.Resource, error) {
	custom, err := widgetSubresources("v1")
	if err != nil {
		return registry.Resource{}, err
	}
	res := widgetResource("v1")
	res.Subresources = registry.Subresources{Status: true, Scale: widgetScale(), Custom: custom}
	// kubectl get widgets.v1.example.dev --field-selector spec.color=red
	res.SelectableFields = []string{".spec.color", ".status.phase"}
	res.PrinterColumns = []registry.Column{
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Color", Type: "string", JSONPath: ".spec.color"},
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	return registry.ForType[Widget](res)
}
