package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// The scale subresource presents an object as an autoscaling/v1 Scale built
// from the type's replica paths, and writes spec.replicas back through them.

// ScaleGroupVersionKind is the kind of the /scale subresource.
var ScaleGroupVersionKind = meta.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// GetScale returns the Scale of the object ns/name.
func (s *Store) GetScale(ctx context.Context, ns, name string) (Object, error) {
	sc := s.res.Subresources.Scale
	if sc == nil {
		return nil, meta.NewNotFoundPath()
	}
	obj, err := s.GetObject(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return s.scaleOf(obj), nil
}

func (s *Store) scaleOf(obj Object) Object {
	sc := s.res.Subresources.Scale
	md := obj["metadata"].(map[string]any)
	smd := map[string]any{}
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "creationTimestamp"} {
		if v, ok := md[k]; ok {
			smd[k] = v
		}
	}
	spec := map[string]any{}
	if v, ok := lookupPath(obj, splitPath(sc.SpecReplicasPath)); ok {
		spec["replicas"] = v
	}
	status := map[string]any{"replicas": int64(0)}
	if v, ok := lookupPath(obj, splitPath(sc.StatusReplicasPath)); ok {
		status["replicas"] = v
	}
	if sc.LabelSelectorPath != "" {
		if v, ok := lookupPath(obj, splitPath(sc.LabelSelectorPath)); ok {
			if str, ok := v.(string); ok {
				status["selector"] = str
			}
		}
	}
	return Object{"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": smd, "spec": spec, "status": status}
}

// UpdateScale sets the object's desired replicas from a Scale. A
// resourceVersion in the Scale is a precondition on the object.
func (s *Store) UpdateScale(ctx context.Context, ns, name string, scale Object, opts WriteOptions) (Object, error) {
	sc := s.res.Subresources.Scale
	if sc == nil {
		return nil, meta.NewNotFoundPath()
	}
	if k, _ := scale["kind"].(string); k != "" && k != "Scale" {
		return nil, meta.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (Scale)", k))
	}
	replicas, err := scaleReplicas(nestedValue(scale, "spec", "replicas"))
	if err != nil {
		return nil, err
	}
	if replicas < 0 {
		return nil, meta.NewInvalid(ScaleGroupVersionKind, name, meta.ErrorList{meta.Invalid(meta.NewPath("spec", "replicas"), replicas, "must be greater than or equal to 0")})
	}
	rv, _ := nestedValue(scale, "metadata", "resourceVersion").(string)
	for attempt := 0; ; attempt++ {
		obj, err := s.GetObject(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if rv != "" {
			if meta.GetResourceVersion(obj) != rv {
				return nil, meta.NewConflict(s.res.GroupResource(), name, meta.ConflictModified)
			}
		}
		if err := meta.SetNested(obj, replicas, splitPath(sc.SpecReplicasPath)...); err != nil {
			return nil, meta.NewInternalError(err)
		}
		// As kube-apiserver: the write is the scale subresource's, for
		// admission and in managedFields.
		res, err := s.Update(ctx, ns, name, obj, WriteOptions{DryRun: opts.DryRun, FieldValidation: "Ignore", FieldManager: opts.FieldManager, Subresource: "scale"})
		if meta.ReasonOf(err) == meta.StatusReasonConflict && rv == "" && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if res.Object == nil {
			if res.Object, err = decodeObject(res.JSON); err != nil {
				return nil, meta.NewInternalError(err)
			}
		}
		return s.scaleOf(res.Object), nil
	}
}

// scaleReplicas reads a Scale's spec.replicas, an int32 in autoscaling/v1:
// anything else fails kube-apiserver's typed decoding, a 400. Absent is 0
// (autoscaling/v1 omits zero: kubectl scale --replicas=0 sends "spec":{}).
func scaleReplicas(raw any) (int64, error) {
	if raw == nil {
		return 0, nil
	}
	integral := true
	switch x := raw.(type) {
	case json.Number:
		// Go's decoding into int32 takes integer literals only: 2.0 and 2e0 fail.
		_, err := strconv.ParseInt(string(x), 10, 64)
		integral = err == nil
	case float64, float32:
		integral = false
	}
	if n, ok := meta.AsInt64(raw); ok && integral && n >= math.MinInt32 && n <= math.MaxInt32 {
		return n, nil
	}
	what := "number " + fmt.Sprint(raw)
	switch raw.(type) {
	case string:
		what = "string"
	case bool:
		what = "bool"
	case map[string]any:
		what = "object"
	case []any:
		what = "array"
	}
	return 0, meta.NewBadRequest(fmt.Sprintf(`Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal %s into Go struct field ScaleSpec.spec.replicas of type int32`, what))
}

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func nestedValue(obj Object, path ...string) any {
	v, _ := lookupPath(obj, path)
	return v
}
