package rules

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"

	"github.com/kapi-dev/kapi/schema/rules/library"
)

// envOptions are the CEL environment of rules: Kubernetes' for CRD
// validation rules (package library).
func envOptions() []cel.EnvOption { return library.EnvOptions() }

// staticCost is the cost model of the registration-time estimates, with
// the schema's bounds for the sizes of what rules read.
func staticCost(sizes checker.CostEstimator) checker.CostEstimator {
	return &library.CostEstimator{SizeEstimator: sizes}
}

// programOptions are the options of a rule's program: Kubernetes' cost
// tracking and the per-call limit. A cheap rule (cheapRule) runs without
// tracking.
func (c *compiler) programOptions(cheap bool) []cel.ProgramOption {
	if cheap {
		return []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	}
	return append(library.ProgramOptions(), cel.CostLimit(c.limits.PerCall))
}
