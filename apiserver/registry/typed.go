package registry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// ForType returns res with its schema derived from the Go type T (json tags,
// plus kapi:"..." markers; see package schema) when res.Schema is nil. The
// type should embed meta.TypeMeta and have a `Metadata meta.ObjectMeta
// \`json:"metadata"\“ field.
func ForType[T any](res Resource) (Resource, error) {
	if res.Schema == nil {
		s, err := schema.For[T]()
		if err != nil {
			return res, fmt.Errorf("registry: deriving the schema of %s: %w", res.Kind, err)
		}
		res.Schema = s
	}
	return res, nil
}

// Typed adapts a hook on a typed object to the generic Strategy.Validate
// signature: the object is converted through JSON.
func Typed[T any](fn func(ctx context.Context, obj *T) meta.ErrorList) func(context.Context, Object) meta.ErrorList {
	return func(ctx context.Context, obj Object) meta.ErrorList {
		var t T
		if err := convert(obj, &t); err != nil {
			return meta.ErrorList{meta.Internal(meta.NewPath(""), err)}
		}
		return fn(ctx, &t)
	}
}

// TypedUpdate adapts an update hook on typed objects to the generic
// Strategy.ValidateUpdate signature.
func TypedUpdate[T any](fn func(ctx context.Context, obj, old *T) meta.ErrorList) func(context.Context, Object, Object) meta.ErrorList {
	return func(ctx context.Context, obj, old Object) meta.ErrorList {
		var t, o T
		if err := convert(obj, &t); err != nil {
			return meta.ErrorList{meta.Internal(meta.NewPath(""), err)}
		}
		if err := convert(old, &o); err != nil {
			return meta.ErrorList{meta.Internal(meta.NewPath(""), err)}
		}
		return fn(ctx, &t, &o)
	}
}

func convert(obj Object, out any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
