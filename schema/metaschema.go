package schema

import "fmt"

// objectMetaSchema is the schema metadata is pruned against at the root and
// in embedded resources: the fields of meta.ObjectMeta, plus the deprecated
// selfLink that Kubernetes' ObjectMeta still accepts (older clients send it
// back). It is built once and never modified (it has no pattern, so
// validation never touches its cache).
var objectMetaSchema = mustObjectMetaSchema()

func mustObjectMetaSchema() *Schema {
	s, err := (&goBuilder{}).build(objectMetaType, "meta.ObjectMeta")
	if err != nil {
		panic(fmt.Sprintf("schema: deriving the ObjectMeta schema: %v", err))
	}
	s.Properties["selfLink"] = &Schema{Type: TypeString}
	return s
}
