package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// leaseMessage is coordination.k8s.io/v1 Lease, wire-compatible with
// k8s.io/api's generated.proto.
var leaseMessage = codec.MustMessage("Lease",
	codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
	codec.Field{Name: "spec", Number: 2, Kind: codec.MessageKind, Message: codec.MustMessage("LeaseSpec",
		codec.Field{Name: "holderIdentity", Number: 1, Kind: codec.String, Keep: true},
		codec.Field{Name: "leaseDurationSeconds", Number: 2, Kind: codec.Int32, Keep: true},
		codec.Field{Name: "acquireTime", Number: 3, Kind: codec.MicroTime},
		codec.Field{Name: "renewTime", Number: 4, Kind: codec.MicroTime},
		codec.Field{Name: "leaseTransitions", Number: 5, Kind: codec.Int32, Keep: true},
		codec.Field{Name: "strategy", Number: 6, Kind: codec.String, Keep: true},
		codec.Field{Name: "preferredHolder", Number: 7, Kind: codec.String, Keep: true})},
)

// rfc3339Micro is the JSON form of meta/v1 MicroTime.
const rfc3339Micro = "2006-01-02T15:04:05.000000Z07:00"

// leaseTimes are the MicroTime fields of a lease's spec.
var leaseTimes = []string{"acquireTime", "renewTime"}

// Leases returns the coordination.k8s.io/v1 leases resource, as client-go's
// leader election (resourcelock.LeaseLock) and kubelets' heartbeats use it:
// acquireTime and renewTime are MicroTimes (RFC 3339 with microseconds, in
// UTC), with Kubernetes' validation of the spec.
func Leases() Resource {
	return Resource{
		Group:      "coordination.k8s.io",
		Version:    "v1",
		Resource:   "leases",
		Kind:       "Lease",
		Namespaced: true,
		Schema: mustSchema(`{"type":"object","description":"Lease defines a lease concept.","properties":{` + typeMetaProps + `,
"spec":{"x-kapi-definition":"io.k8s.api.coordination.v1.LeaseSpec","type":"object","description":"spec contains the specification of the Lease.","properties":{
"holderIdentity":{"type":"string","description":"holderIdentity contains the identity of the holder of a current lease."},
"leaseDurationSeconds":{"type":"integer","format":"int32","description":"leaseDurationSeconds is a duration that candidates for a lease need to wait to force acquire it. This is measured against the time of last observed renewTime."},
"acquireTime":{"type":"string","format":"date-time","description":"acquireTime is a time when the current lease was acquired."},
"renewTime":{"type":"string","format":"date-time","description":"renewTime is a time when the current holder of a lease has last updated the lease."},
"leaseTransitions":{"type":"integer","format":"int32","description":"leaseTransitions is the number of transitions of a lease between holders."},
"strategy":{"type":"string","description":"Strategy indicates the strategy for picking the leader for coordinated leader election."},
"preferredHolder":{"type":"string","description":"PreferredHolder signals to a lease holder that the lease has a more optimal holder and should be given up."}}}}}`),
		Protobuf: leaseMessage,
		PrinterColumns: []Column{
			{Name: "Holder", Type: "string", Description: "holderIdentity contains the identity of the holder of a current lease.", Value: func(obj Object) any {
				h, _, _ := meta.NestedString(obj, "spec", "holderIdentity")
				return h // "" without a holder, as kube-apiserver
			}},
			ageColumn,
		},
		Options: Options{
			StrategicMerge:   true,
			CreateOnUpdate:   true,
			NoGeneration:     true,
			OmitItemTypeMeta: true,
			TypedDecoding:    true,
		},
		Strategy: Strategy{
			CheckBody: checkLeaseBody,
			Validate:  func(_ context.Context, obj Object) meta.ErrorList { return validateLease(obj) },
		}.prepareEveryWrite(normalizeLease),
	}
}

// checkLeaseBody refuses times meta/v1 MicroTime cannot hold, with
// kube-apiserver's 400.
func checkLeaseBody(obj Object) error {
	spec, _ := obj["spec"].(map[string]any)
	for _, f := range leaseTimes {
		if s, ok := spec[f].(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return DecodeError("Lease", "v1", err)
			}
		}
	}
	for _, f := range []string{"leaseDurationSeconds", "leaseTransitions"} {
		v, ok := spec[f]
		if !ok || !meta.IsNumber(v) {
			continue // absent, or not a number: the schema says so
		}
		if n, ok := meta.AsInt64(v); !ok || n != int64(int32(n)) {
			return DecodeError("Lease", "v1", fmt.Errorf("json: cannot unmarshal number %v into Go struct field LeaseSpec.spec.%s of type int32", v, f))
		}
	}
	return nil
}

// normalizeLease writes acquireTime and renewTime as meta/v1 MicroTime
// marshals them (UTC, exactly six fractional digits, finer digits dropped)
// and gives a lease without a spec an empty one.
func normalizeLease(obj Object) {
	if obj["spec"] == nil {
		obj["spec"] = map[string]any{} // a struct in kube's Lease, never left out
	}
	spec, _ := obj["spec"].(map[string]any)
	for _, f := range leaseTimes {
		if s, ok := spec[f].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				spec[f] = t.UTC().Truncate(time.Microsecond).Format(rfc3339Micro)
			}
		}
	}
}

// validLeaseStrategies are the Kubernetes-defined coordinated leader
// election strategies (a strategy with a '/' is anyone's qualified name).
var validLeaseStrategies = []string{"OldestEmulationVersion"}

// validateLease is Kubernetes' ValidateLeaseSpec.
func validateLease(obj Object) meta.ErrorList {
	spec, _ := obj["spec"].(map[string]any)
	p := meta.NewPath("spec")
	var errs meta.ErrorList
	if n, ok := meta.AsInt64(spec["leaseDurationSeconds"]); ok && n <= 0 {
		errs = append(errs, meta.Invalid(p.Child("leaseDurationSeconds"), n, "must be greater than 0"))
	}
	if n, ok := meta.AsInt64(spec["leaseTransitions"]); ok && n < 0 {
		errs = append(errs, meta.Invalid(p.Child("leaseTransitions"), n, "must be greater than or equal to 0"))
	}
	strategy, hasStrategy := spec["strategy"].(string)
	if hasStrategy {
		sp := p.Child("strategy")
		if !strings.Contains(strategy, "/") {
			if !contains(validLeaseStrategies, strategy) {
				errs = append(errs, meta.NotSupported(sp, strategy, validLeaseStrategies))
			}
		} else {
			for _, msg := range meta.IsQualifiedName(strategy) {
				errs = append(errs, meta.Invalid(sp, strategy, msg))
			}
		}
	}
	if ph, _ := spec["preferredHolder"].(string); ph != "" && strategy == "" {
		errs = append(errs, meta.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}
