package registry

import (
	"fmt"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// isStandardFinalizer reports Kubernetes' own finalizer names, the only ones
// without a "/" that its strict types accept.
func isStandardFinalizer(name string) bool {
	return name == NamespaceFinalizer || name == FinalizerOrphan || name == FinalizerForeground
}

// unqualifiedFinalizer reports a finalizer name with no "/" that is not
// standard.
func unqualifiedFinalizer(name string) bool {
	return !strings.Contains(name, "/") && !isStandardFinalizer(name)
}

// finalizerNames checks the metadata.finalizers that obj adds to old (nil:
// every one). With strict (Options.StandardFinalizers) an unqualified name
// is refused, as kube-apiserver refuses it for most of its built-in types;
// otherwise it is accepted with a warning, as for custom resources. Names
// old already has pass either way: objects stored before a type turned
// strict stay writable, and their finalizers can go one at a time.
func finalizerNames(obj, old Object, strict bool) (meta.ErrorList, []string) {
	fins := meta.GetFinalizers(obj)
	if len(fins) == 0 {
		return nil, nil
	}
	had := meta.GetFinalizers(old)
	var (
		errs     meta.ErrorList
		warnings []string
	)
	for i, f := range fins {
		if !unqualifiedFinalizer(f) || contains(had, f) {
			continue
		}
		if strict {
			errs = append(errs, unqualifiedFinalizerError(meta.NewPath("metadata", "finalizers").Index(i), f))
		} else {
			warnings = append(warnings, fmt.Sprintf("metadata.finalizers: %q: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers", f))
		}
	}
	return errs, warnings
}

// unqualifiedFinalizerError is kube-apiserver's refusal of an unqualified
// finalizer name at p.
func unqualifiedFinalizerError(p *meta.Path, name string) *meta.FieldError {
	return meta.Invalid(p, name, "name is neither a standard finalizer name nor is it fully qualified")
}
