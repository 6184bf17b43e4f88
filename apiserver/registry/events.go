package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// EventOptions configure the events types (Events).
type EventOptions struct {
	// TTL is how long an event lives after its last write, as
	// kube-apiserver's --event-ttl: the controllers then delete it.
	// Default 1h.
	TTL time.Duration
	// PerUser and PerNamespace are the write budgets of events: what one
	// user, and what all the users writing in one namespace, may create,
	// update or patch. Beyond, a write is refused with 429 and Retry-After,
	// as Kubernetes' EventRateLimit admission does, and event recorders
	// retry later or drop the event: a chatty controller's storm stays
	// within its budget and leaves the rest of the API alone. Defaults: 50
	// per second with bursts of 500 per user, 100 per second with bursts of
	// 1000 per namespace. Limit.Disabled turns a budget off.
	PerUser      Limit
	PerNamespace Limit
}

// Limit is a token bucket: QPS writes per second on average, Burst at once
// (default: QPS, at least 1). A Limit without a QPS, or Disabled, is off.
type Limit struct {
	QPS      float64
	Burst    int
	Disabled bool
}

// Event types Kubernetes defines.
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// Events returns core v1 events and events.k8s.io/v1 events: two views of
// the same stored objects, as kube-apiserver serves them. An event written
// through one is read through the other with Kubernetes' field mapping
// (involvedObject is regarding, message is note, source is
// deprecatedSource, ...). Both accept PUT to create, select on the fields
// kubectl and event recorders use (involvedObject.*, regarding.*, reason,
// type, source, reportingComponent / reportingController), share one write
// budget, and expire opts.TTL after their last write. A host serves either
// or both; the events.k8s.io view needs no core registration to work.
func Events(opts EventOptions) []Resource {
	if opts.TTL <= 0 {
		opts.TTL = time.Hour
	}
	if opts.PerUser == (Limit{}) {
		opts.PerUser = Limit{QPS: 50, Burst: 500}
	}
	if opts.PerNamespace == (Limit{}) {
		opts.PerNamespace = Limit{QPS: 100, Burst: 1000}
	}
	budget := newEventBudget(opts.PerUser, opts.PerNamespace)
	return []Resource{coreEvents(opts, budget), eventsV1(opts, budget)}
}

// eventsOptions are the lifecycle options both event views share:
// kube-apiserver's event strategy creates on update and updates without a
// resourceVersion; names are only path segments there.
func eventsOptions(opts EventOptions) Options {
	return Options{
		StrategicMerge:      true,
		UnconditionalUpdate: true,
		CreateOnUpdate:      true,
		NoGeneration:        true,
		OmitItemTypeMeta:    true,
		TypedDecoding:       true,
		TTL:                 opts.TTL,
		NameValidation:      meta.IsValidPathSegmentName,
	}
}

// objectReferenceSchema is core/v1 ObjectReference.
const objectReferenceSchema = `{"x-kapi-definition":"io.k8s.api.core.v1.ObjectReference","type":"object","x-kubernetes-map-type":"atomic","description":"ObjectReference contains enough information to let you inspect or modify the referred object.","properties":{
"apiVersion":{"type":"string","description":"API version of the referent."},
"fieldPath":{"type":"string","description":"If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement."},
"kind":{"type":"string","description":"Kind of the referent."},
"name":{"type":"string","description":"Name of the referent."},
"namespace":{"type":"string","description":"Namespace of the referent."},
"resourceVersion":{"type":"string","description":"Specific resourceVersion to which this reference is made, if any."},
"uid":{"type":"string","description":"UID of the referent."}}}`

const eventSourceSchema = `{"x-kapi-definition":"io.k8s.api.core.v1.EventSource","type":"object","description":"EventSource contains information for an event.","properties":{
"component":{"type":"string","description":"Component from which the event is generated."},
"host":{"type":"string","description":"Node name on which the event is generated."}}}`

// eventSeriesSchema is EventSeries, defined once in core/v1 and once in
// events.k8s.io/v1 (pkg, the definition's package).
func eventSeriesSchema(pkg string) string {
	return `{"x-kapi-definition":"io.k8s.api.` + pkg + `.EventSeries",` + eventSeriesBody
}

const eventSeriesBody = `"type":"object","description":"EventSeries contain information on series of events, i.e. thing that was/is happening continuously for some time.","properties":{
"count":{"type":"integer","format":"int32","description":"Number of occurrences in this series up to the last heartbeat time."},
"lastObservedTime":{"type":"string","format":"date-time","description":"Time of the last occurrence observed."}}}`

// Protobuf messages shared by both event views (k8s.io/api core/v1).
var (
	objectReferenceMessage = codec.MustMessage("ObjectReference",
		codec.Field{Name: "kind", Number: 1, Kind: codec.String},
		codec.Field{Name: "namespace", Number: 2, Kind: codec.String},
		codec.Field{Name: "name", Number: 3, Kind: codec.String},
		codec.Field{Name: "uid", Number: 4, Kind: codec.String},
		codec.Field{Name: "apiVersion", Number: 5, Kind: codec.String},
		codec.Field{Name: "resourceVersion", Number: 6, Kind: codec.String},
		codec.Field{Name: "fieldPath", Number: 7, Kind: codec.String})
	eventSourceMessage = codec.MustMessage("EventSource",
		codec.Field{Name: "component", Number: 1, Kind: codec.String},
		codec.Field{Name: "host", Number: 2, Kind: codec.String})
	eventSeriesMessage = codec.MustMessage("EventSeries",
		codec.Field{Name: "count", Number: 1, Kind: codec.Int32},
		codec.Field{Name: "lastObservedTime", Number: 2, Kind: codec.MicroTime})
	coreEventMessage = codec.MustMessage("Event",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "involvedObject", Number: 2, Kind: codec.MessageKind, Message: objectReferenceMessage},
		codec.Field{Name: "reason", Number: 3, Kind: codec.String},
		codec.Field{Name: "message", Number: 4, Kind: codec.String},
		codec.Field{Name: "source", Number: 5, Kind: codec.MessageKind, Message: eventSourceMessage},
		codec.Field{Name: "firstTimestamp", Number: 6, Kind: codec.Time},
		codec.Field{Name: "lastTimestamp", Number: 7, Kind: codec.Time},
		codec.Field{Name: "count", Number: 8, Kind: codec.Int32},
		codec.Field{Name: "type", Number: 9, Kind: codec.String},
		codec.Field{Name: "eventTime", Number: 10, Kind: codec.MicroTime},
		codec.Field{Name: "series", Number: 11, Kind: codec.MessageKind, Message: eventSeriesMessage},
		codec.Field{Name: "action", Number: 12, Kind: codec.String},
		codec.Field{Name: "related", Number: 13, Kind: codec.MessageKind, Message: objectReferenceMessage},
		codec.Field{Name: "reportingComponent", Number: 14, Kind: codec.String},
		codec.Field{Name: "reportingInstance", Number: 15, Kind: codec.String})
)

// coreEvents is the core v1 events resource.
func coreEvents(opts EventOptions, budget *eventBudget) Resource {
	return Resource{
		Version:    "v1",
		Resource:   "events",
		Kind:       "Event",
		ShortNames: []string{"ev"},
		Namespaced: true,
		Schema: mustSchema(`{"type":"object","description":"Event is a report of an event somewhere in the cluster. Events have a limited retention time and triggers and messages may evolve with time.","properties":{` + typeMetaProps + `,
"involvedObject":` + objectReferenceSchema + `,
"reason":{"type":"string","description":"This should be a short, machine understandable string that gives the reason for the transition into the object's current status."},
"message":{"type":"string","description":"A human-readable description of the status of this operation."},
"source":` + eventSourceSchema + `,
"firstTimestamp":{"type":"string","format":"date-time","description":"The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"},
"lastTimestamp":{"type":"string","format":"date-time","description":"The time at which the most recent occurrence of this event was recorded."},
"count":{"type":"integer","format":"int32","description":"The number of times this event has occurred."},
"type":{"type":"string","description":"Type of this event (Normal, Warning), new types could be added in the future"},
"eventTime":{"type":"string","format":"date-time","description":"Time when this Event was first observed."},
"series":` + eventSeriesSchema("core.v1") + `,
"action":{"type":"string","description":"What action was taken/failed regarding to the Regarding object."},
"related":` + objectReferenceSchema + `,
"reportingComponent":{"type":"string","description":"Name of the controller that emitted this Event, e.g. ` + "`kubernetes.io/kubelet`" + `."},
"reportingInstance":{"type":"string","description":"ID of the controller instance, e.g. ` + "`kubelet-xyzf`" + `."}}}`),
		Protobuf:       coreEventMessage,
		PrinterColumns: eventColumns(coreEventFields),
		SelectableFields: []string{".involvedObject.kind", ".involvedObject.namespace", ".involvedObject.name",
			".involvedObject.uid", ".involvedObject.apiVersion", ".involvedObject.resourceVersion",
			".involvedObject.fieldPath", ".reason", ".reportingComponent", ".type"},
		FieldLabels: map[string]string{"source": ".source.component"},
		Admission:   []AdmissionHook{budget.hook()},
		Options:     eventsOptions(opts),
		Strategy:    eventStrategy(coreEventFields, false),
	}
}

// eventFields names an event's fields in one of its two forms.
type eventFields struct {
	apiVersion                                                       string
	regarding, note, source, first, last, count, reportingController string
}

var (
	coreEventFields = eventFields{apiVersion: "v1", regarding: "involvedObject", note: "message", source: "source",
		first: "firstTimestamp", last: "lastTimestamp", count: "count", reportingController: "reportingComponent"}
	eventsV1Fields = eventFields{apiVersion: "events.k8s.io/v1", regarding: "regarding", note: "note", source: "deprecatedSource",
		first: "deprecatedFirstTimestamp", last: "deprecatedLastTimestamp", count: "deprecatedCount", reportingController: "reportingController"}
)

// renames lists the field pairs that differ between the two forms.
func (f eventFields) renames() [][2]string {
	return [][2]string{{"regarding", f.regarding}, {"note", f.note}, {"source", f.source}, {"first", f.first},
		{"last", f.last}, {"count", f.count}, {"reportingController", f.reportingController}}
}

// eventColumns are kube-apiserver's Table columns of events (both views),
// declared strings as its printers declare them.
func eventColumns(f eventFields) []Column {
	str := func(obj Object, path ...string) string { s, _, _ := meta.NestedString(obj, path...); return s }
	first := func(obj Object) string {
		if t := str(obj, f.first); t != "" {
			return t
		}
		return str(obj, "eventTime")
	}
	return []Column{
		{Name: "Last Seen", Type: "date", DefinitionType: "string", Description: "The time at which the most recent occurrence of this event was recorded.", Value: func(obj Object) any {
			if _, ok := obj["series"].(map[string]any); ok {
				return orZeroTime(str(obj, "series", "lastObservedTime"))
			}
			if t := str(obj, f.last); t != "" {
				return t
			}
			return orZeroTime(first(obj))
		}},
		{Name: "Type", Type: "string", JSONPath: ".type", Description: "Type of this event (Normal, Warning), new types could be added in the future."},
		{Name: "Reason", Type: "string", JSONPath: ".reason", Description: "This should be a short, machine understandable string that gives the reason for this event being generated."},
		{Name: "Object", Type: "string", Description: "The object that this event is about.", Value: func(obj Object) any {
			kind := strings.ToLower(str(obj, f.regarding, "kind"))
			if name := str(obj, f.regarding, "name"); name != "" {
				return kind + "/" + name
			}
			return kind
		}},
		{Name: "Subobject", Type: "string", Priority: 1, Description: "The field of the object this event is about.", Value: func(obj Object) any {
			return str(obj, f.regarding, "fieldPath")
		}},
		{Name: "Source", Type: "string", Priority: 1, Description: "The component reporting this event.", Value: func(obj Object) any {
			component, instance := str(obj, f.source, "component"), str(obj, f.source, "host")
			if component == "" {
				component = str(obj, f.reportingController)
			}
			if instance == "" {
				instance = str(obj, "reportingInstance")
			}
			if instance == "" {
				return component
			}
			return component + ", " + instance
		}},
		{Name: "Message", Type: "string", Description: "A human-readable description of the status of this operation.", Value: func(obj Object) any {
			return strings.TrimSpace(str(obj, f.note))
		}},
		{Name: "First Seen", Type: "date", DefinitionType: "string", Priority: 1, Description: "The time at which the event was first recorded.", Value: func(obj Object) any {
			return orZeroTime(first(obj))
		}},
		{Name: "Count", Type: "integer", DefinitionType: "string", Priority: 1, Description: "The number of times this event has occurred.", Value: func(obj Object) any {
			if _, ok := obj["series"].(map[string]any); ok {
				n, _ := meta.AsInt64(nestedValue(obj, "series", "count"))
				return n
			}
			if n, ok := meta.AsInt64(obj[f.count]); ok && n != 0 {
				return n
			}
			return int64(1) // a singleton event of the new API has no count
		}},
		{Name: "Name", Type: "string", Format: "name", Priority: 1, JSONPath: ".metadata.name", Description: "Name of the event."},
	}
}

// orZeroTime is t, or the zero time (shown as "<unknown>") when t is empty.
func orZeroTime(t string) string {
	if t == "" {
		return "0001-01-01T00:00:00Z"
	}
	return t
}

// eventStrategy is the lifecycle of events in form f; strict applies the
// checks kube-apiserver makes of events written through events.k8s.io/v1.
func eventStrategy(f eventFields, strict bool) Strategy {
	return Strategy{
		CheckBody: func(obj Object) error { return checkEventBody(obj, f) },
		Validate: func(_ context.Context, obj Object) meta.ErrorList {
			return validateEvent(obj, f, strict)
		},
		ValidateUpdate: func(_ context.Context, obj, old Object) meta.ErrorList {
			errs := validateEvent(obj, f, false)
			if strict {
				errs = append(errs, validateEventUpdate(obj, old, f)...)
			}
			return errs
		},
	}.prepareEveryWrite(func(obj Object) { normalizeEventTimes(obj, f) })
}

// eventTimeFields are an event's meta/v1 Time (seconds) and MicroTime
// fields in form f, each as a path.
func eventTimeFields(f eventFields) (times, microTimes [][]string) {
	return [][]string{{f.first}, {f.last}}, [][]string{{"eventTime"}, {"series", "lastObservedTime"}}
}

// normalizeEventTimes writes the times of an event as meta/v1 marshals
// them: UTC, whole seconds for Time, six fractional digits for MicroTime.
func normalizeEventTimes(obj Object, f eventFields) {
	times, micro := eventTimeFields(f)
	for i, paths := range [][][]string{times, micro} {
		for _, p := range paths {
			s, ok, _ := meta.NestedString(obj, p...)
			if !ok {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				continue
			}
			v := t.UTC().Truncate(time.Second).Format(time.RFC3339)
			if i == 1 {
				v = t.UTC().Truncate(time.Microsecond).Format(rfc3339Micro)
			}
			_ = meta.SetNested(obj, v, p...)
		}
	}
}

// checkEventBody refuses what Kubernetes' Event struct cannot hold, with
// kube-apiserver's 400: times that do not parse, counts beyond int32.
func checkEventBody(obj Object, f eventFields) error {
	version := strings.TrimPrefix(f.apiVersion, "events.k8s.io/")
	times, micro := eventTimeFields(f)
	for _, p := range append(times, micro...) {
		if s, ok := nestedValue(obj, p...).(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return DecodeError("Event", version, err)
			}
		}
	}
	for _, p := range [][]string{{f.count}, {"series", "count"}} {
		v := nestedValue(obj, p...)
		if v == nil || !meta.IsNumber(v) {
			continue
		}
		if n, ok := meta.AsInt64(v); !ok || n != int64(int32(n)) {
			return DecodeError("Event", version, fmt.Errorf("json: cannot unmarshal number %v into Go struct field of type int32", v))
		}
	}
	return nil
}
