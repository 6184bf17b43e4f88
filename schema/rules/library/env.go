// Package library is the CEL environment of CustomResourceDefinition
// validation rules (x-kubernetes-validations): the options, extensions and
// Kubernetes function libraries kube-apiserver compiles and runs rules with,
// at the Kubernetes version kapi reports, and the cost accounting behind
// Kubernetes' rule cost limits.
//
// The Kubernetes libraries (lists, regex, urls, quantity, ip, cidr, format,
// semver) are written here from their documented behaviour rather than
// imported, so that kapi carries no k8s.io dependency; their overload ids,
// type names, results and error messages are Kubernetes' own, since rules
// and their failures must read the same on kapi as on a real cluster.
package library

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// KubernetesVersion is the Kubernetes minor version whose CEL environment
// EnvOptions reproduces.
//
// kube-apiserver compiles new or changed rules with the environment of its
// previous minor version (its compatibility version, 1.35 here) and rules
// already stored with its own; nothing changed between 1.35 and 1.36, so a
// single environment serves both.
const KubernetesVersion = "1.36"

// EnvOptions returns the options of the CEL environment for CRD validation
// rules, in the order kube-apiserver applies them: the CEL standard library,
// the language settings (homogeneous aggregate literals, UTC default time
// zone, cross-type numeric comparisons, optional types, literal validators),
// the cel-go extensions (strings v2, sets, two-variable comprehensions,
// lists v3), the Kubernetes libraries, and the cost settings. Each call
// returns fresh libraries; add the rule's variables (self, oldSelf) on top.
func EnvOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.StdLib(),
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.Lib(urlsLib()),
		cel.Lib(regexLib()),
		// Kubernetes keeps has() free, as before cel-go v0.17.7.
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.Lib(listsLib()),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(cel.OptionalTypesVersion(2)),
		cel.Lib(quantityLib()),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(ext.SetsVersion(0)),
		cel.Lib(ipLib()),
		cel.Lib(cidrLib()),
		cel.Lib(formatLib()),
		ext.TwoVarComprehensions(ext.TwoVarComprehensionsVersion(0)),
		cel.Lib(semverLib()),
		ext.Lists(ext.ListsVersion(3)),
		cel.Lib(compatLib()),
	}
}

// ProgramOptions returns the program options kube-apiserver evaluates rules
// with: optimization, cost tracking with this package's CostEstimator, and
// has() at no cost. The per-call cost limit (cel.CostLimit) and interrupt
// checks are the caller's.
func ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.CostTracking(&CostEstimator{}),
	}
}

// library is a named set of function declarations and program options,
// registered once per environment.
type library struct {
	name     string
	options  []cel.EnvOption
	programs []cel.ProgramOption
}

var _ cel.SingletonLibrary = (*library)(nil)

// LibraryName implements cel.SingletonLibrary.
func (l *library) LibraryName() string { return l.name }

// CompileOptions implements cel.Library.
func (l *library) CompileOptions() []cel.EnvOption { return l.options }

// ProgramOptions implements cel.Library.
func (l *library) ProgramOptions() []cel.ProgramOption { return l.programs }

// compatLib declares what the standard library of cel-go v0.26, the version
// Kubernetes 1.36 is built with, had and the cel-go kapi uses dropped:
// duration(int), which type-checks and fails at evaluation.
func compatLib() *library {
	return &library{name: "kapi.compat.cel-go-v0.26", options: []cel.EnvOption{
		cel.Function("duration", cel.Overload("int64_to_duration",
			[]*cel.Type{cel.IntType}, cel.DurationType,
			cel.UnaryBinding(func(v ref.Val) ref.Val { return v.ConvertToType(types.DurationType) }))),
	}}
}
