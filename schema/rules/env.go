package rules

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// envOptions are the CEL libraries rules may use.
func envOptions() []cel.EnvOption {
	return []cel.EnvOption{ext.Strings(), ext.Sets(), ext.Math(), ext.Encoders(), cel.OptionalTypes()}
}

// staticCost is the cost model of the registration-time estimates.
func staticCost(sizes checker.CostEstimator) checker.CostEstimator { return sizes }

// runtimeCost is the cost model of evaluations.
func runtimeCost() interpreter.ActualCostEstimator { return nil }
