package registry

import (
	"fmt"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// isStandardFinalizer reports Kubernetes' own finalizer names, the only ones
// without a "/" that its built-in types accept.
func isStandardFinalizer(name string) bool {
	return name == NamespaceFinalizer || name == FinalizerOrphan || name == FinalizerForeground
}

// standardFinalizerErrors refuses the names of fins that are neither
// qualified with a "/" nor standard, as kube-apiserver does for its
// built-in types (their qualified-name syntax is metadata validation's).
func standardFinalizerErrors(fins []string, p *meta.Path) meta.ErrorList {
	var errs meta.ErrorList
	for i, f := range fins {
		if !strings.Contains(f, "/") && !isStandardFinalizer(f) {
			errs = append(errs, meta.Invalid(p.Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// finalizerWarnings warns of the finalizers obj adds to old (nil: every
// one) that are neither qualified nor standard, as kube-apiserver does for
// custom resources, which accept them.
func finalizerWarnings(obj, old Object) []string {
	var warnings []string
	had := meta.GetFinalizers(old)
	for _, f := range meta.GetFinalizers(obj) {
		if !strings.Contains(f, "/") && !isStandardFinalizer(f) && !contains(had, f) {
			warnings = append(warnings, fmt.Sprintf("metadata.finalizers: %q: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers", f))
		}
	}
	return warnings
}
