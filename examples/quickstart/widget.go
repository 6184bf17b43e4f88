package main

import (
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Widget is the example custom type: a typed Go struct whose schema kapi
// derives from the json tags and kapi markers.
type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
	Status        WidgetStatus    `json:"status,omitempty"`
}

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	Size     int64        `json:"size" kapi:"required,min=0" doc:"Size of the widget."`
	Color    string       `json:"color,omitempty" doc:"Color of the widget."`
	Replicas *int64       `json:"replicas,omitempty" doc:"Desired number of replicas."`
	Tags     []string     `json:"tags,omitempty" kapi:"listType=set" doc:"Tags of the widget."`
	Ports    []WidgetPort `json:"ports,omitempty" kapi:"listType=map,listMapKeys=name" doc:"Ports the widget serves."`
}

// WidgetPort is one named port.
type WidgetPort struct {
	Name     string `json:"name" kapi:"required"`
	Port     int64  `json:"port" kapi:"required"`
	Protocol string `json:"protocol,omitempty"`
}

// WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	Replicas int64  `json:"replicas,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Selector string `json:"selector,omitempty"`
}

// widgets is the registration of example.dev/v1 widgets, with the custom
// subresources restart, log and health (extension.go).
func widgets() (registry.Resource, error) {
	custom, err := widgetSubresources()
	if err != nil {
		return registry.Resource{}, err
	}
	return registry.ForType[Widget](registry.Resource{
		Group:      "example.dev",
		Version:    "v1",
		Resource:   "widgets",
		Kind:       "Widget",
		ShortNames: []string{"wd"},
		Categories: []string{"all"},
		Namespaced: true,
		Subresources: registry.Subresources{
			Status: true,
			Scale: &registry.Scale{
				SpecReplicasPath:   ".spec.replicas",
				StatusReplicasPath: ".status.replicas",
				LabelSelectorPath:  ".status.selector",
			},
			Custom: custom,
		},
		// kubectl get widgets --field-selector spec.color=red
		SelectableFields: []string{".spec.color", ".status.phase"},
		PrinterColumns: []registry.Column{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
			{Name: "Color", Type: "string", JSONPath: ".spec.color"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	})
}
