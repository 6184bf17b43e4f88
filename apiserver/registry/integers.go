package registry

import (
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// typedIntegers answers, for a type with Options.TypedDecoding, an integer
// field written with a fraction or an exponent ("2.0", "1.5e1") as
// kube-apiserver's decoding into Go structs does: a 400 naming the field.
// Custom resources keep the rewritten plain integer instead.
func (s *Store) typedIntegers(rewrites []schema.IntegerRewrite) error {
	res := s.res
	if !res.Options.TypedDecoding {
		return nil
	}
	for _, r := range rewrites {
		if !r.Float() {
			continue // "-0": Go reads it as 0
		}
		goType := "int64"
		if r.Schema.Format == "int32" || r.Schema.XIntOrString {
			goType = "int32"
		}
		return meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: json: cannot unmarshal number %s into Go struct field %s of type %s",
			res.Kind, res.Version, res.Kind, r.Written, r.Path, goType))
	}
	return nil
}
