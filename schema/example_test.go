package schema_test

import (
	"encoding/json"
	"fmt"

	"github.com/kapi-dev/kapi/schema"
)

type WidgetSpec struct {
	Size  int      `json:"size" kapi:"required,min=0,max=100"`
	Color string   `json:"color,omitempty" kapi:"enum=red|green|blue,default=red" doc:"The widget's colour."`
	Tags  []string `json:"tags,omitempty" kapi:"listType=set"`
}

// For derives a structural schema from a Go type: json tags name the fields,
// kapi tags add validation, defaults and merge markers.
func ExampleFor() {
	s, err := schema.For[WidgetSpec]()
	if err != nil {
		panic(err)
	}
	out, _ := json.MarshalIndent(s, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "type": "object",
	//   "properties": {
	//     "color": {
	//       "type": "string",
	//       "description": "The widget's colour.",
	//       "enum": [
	//         "red",
	//         "green",
	//         "blue"
	//       ],
	//       "default": "red"
	//     },
	//     "size": {
	//       "type": "integer",
	//       "format": "int64",
	//       "maximum": 100,
	//       "minimum": 0
	//     },
	//     "tags": {
	//       "type": "array",
	//       "items": {
	//         "type": "string"
	//       },
	//       "x-kubernetes-list-type": "set"
	//     }
	//   },
	//   "required": [
	//     "size"
	//   ]
	// }
}

// A request body goes through Prune, Default and Validate, in that order,
// as Kubernetes does for custom resources. Schemas can also be read from
// OpenAPI JSON, e.g. a CRD's openAPIV3Schema.
func ExampleValidate() {
	var s schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","required":["size"],"properties":{
		"size":{"type":"integer","minimum":0},
		"color":{"type":"string","default":"red"}}}`), &s); err != nil {
		panic(err)
	}
	if err := schema.Check(&s); err != nil { // structural, as a CRD's must be
		panic(err)
	}
	var obj any
	_ = json.Unmarshal([]byte(`{"size":-1,"shape":"round"}`), &obj)

	fmt.Println("pruned:", schema.Prune(obj, &s))
	schema.Default(obj, &s)
	for _, e := range schema.Validate(obj, &s) {
		fmt.Println(e)
	}
	fmt.Println(obj)
	// Output:
	// pruned: [shape]
	// size: Invalid value: -1: size in body should be greater than or equal to 0
	// map[color:red size:-1]
}
