package meta_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
)

// A handler or a hook returns a *StatusError; the server answers with its
// code and its Status as the body, exactly as kube-apiserver would.
func ExampleNewNotFound() {
	err := meta.NewNotFound(meta.GroupResource{Group: "example.dev", Resource: "widgets"}, "w1")
	fmt.Println(err.Code(), meta.ReasonOf(err))
	body, _ := json.Marshal(err.Status)
	fmt.Println(string(body))
	// Output:
	// 404 NotFound
	// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.example.dev \"w1\" not found","reason":"NotFound","details":{"name":"w1","group":"example.dev","kind":"widgets"},"code":404}
}

// Field errors from validation become a 422 Invalid Status whose causes name
// each field, which kubectl prints one per line.
func ExampleNewInvalid() {
	spec := meta.NewPath("spec")
	errs := meta.ErrorList{
		meta.Required(spec.Child("size"), ""),
		meta.Invalid(spec.Child("ports").Index(0).Child("port"), 70000, "must be between 1 and 65535"),
	}
	err := meta.NewInvalid(meta.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Widget"}, "w1", errs)
	fmt.Println(err.Code(), err.Status.Reason)
	fmt.Println(err.Status.Message)
	for _, c := range err.Status.Details.Causes {
		fmt.Println(c.Field, "-", c.Type)
	}
	// Output:
	// 422 Invalid
	// Widget.example.dev "w1" is invalid: [spec.size: Required value, spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535]
	// spec.size - FieldValueRequired
	// spec.ports[0].port - FieldValueInvalid
}

// ReasonOf and AsStatusError see through wrapped errors.
func ExampleReasonOf() {
	err := fmt.Errorf("saving: %w", meta.NewConflict(meta.GroupResource{Resource: "configmaps"}, "cm1", meta.ConflictModified))
	fmt.Println(meta.ReasonOf(err) == meta.StatusReasonConflict)
	var se *meta.StatusError
	fmt.Println(errors.As(err, &se), se.Code())
	fmt.Println(meta.ReasonOf(errors.New("plain")) == meta.StatusReasonUnknown)
	// Output:
	// true
	// true 409
	// true
}

// Metadata helpers read and write generic decoded objects.
func ExampleGetLabels() {
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm1"}}
	meta.SetLabels(obj, map[string]string{"app": "web"})
	fmt.Println(meta.GetName(obj), meta.GetLabels(obj))
	sel, err := meta.ParseLabelSelector("app in (web,api),!canary")
	if err != nil {
		panic(err)
	}
	fmt.Println(sel.Matches(meta.GetLabels(obj)))
	// Output:
	// cm1 map[app:web]
	// true
}
