package registry

import (
	"fmt"

	"github.com/kapi-dev/kapi/codec"
)

// eventsV1Message is events.k8s.io/v1 Event (k8s.io/api events/v1).
var eventsV1Message = codec.MustMessage("Event",
	codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
	codec.Field{Name: "eventTime", Number: 2, Kind: codec.MicroTime},
	codec.Field{Name: "series", Number: 3, Kind: codec.MessageKind, Message: eventSeriesMessage},
	codec.Field{Name: "reportingController", Number: 4, Kind: codec.String},
	codec.Field{Name: "reportingInstance", Number: 5, Kind: codec.String},
	codec.Field{Name: "action", Number: 6, Kind: codec.String},
	codec.Field{Name: "reason", Number: 7, Kind: codec.String},
	codec.Field{Name: "regarding", Number: 8, Kind: codec.MessageKind, Message: objectReferenceMessage},
	codec.Field{Name: "related", Number: 9, Kind: codec.MessageKind, Message: objectReferenceMessage},
	codec.Field{Name: "note", Number: 10, Kind: codec.String},
	codec.Field{Name: "type", Number: 11, Kind: codec.String},
	codec.Field{Name: "deprecatedSource", Number: 12, Kind: codec.MessageKind, Message: eventSourceMessage},
	codec.Field{Name: "deprecatedFirstTimestamp", Number: 13, Kind: codec.Time},
	codec.Field{Name: "deprecatedLastTimestamp", Number: 14, Kind: codec.Time},
	codec.Field{Name: "deprecatedCount", Number: 15, Kind: codec.Int32},
)

// eventsV1 is the events.k8s.io/v1 events resource: a view of core v1
// events (StoredAs), with the checks kube-apiserver makes of events
// written through this API (eventTime, reportingController,
// reportingInstance, action and reason required; the deprecated fields
// unset; most fields immutable).
func eventsV1(opts EventOptions, budget *eventBudget) Resource {
	return Resource{
		Group:      "events.k8s.io",
		Version:    "v1",
		Resource:   "events",
		Kind:       "Event",
		ShortNames: []string{"ev"},
		Namespaced: true,
		Schema: mustSchema(`{"type":"object","description":"Event is a report of an event somewhere in the cluster. It generally denotes some state change in the system.","properties":{` + typeMetaProps + `,
"eventTime":{"type":"string","format":"date-time","description":"eventTime is the time when this Event was first observed. It is required."},
"series":` + eventSeriesSchema("events.v1") + `,
"reportingController":{"type":"string","description":"reportingController is the name of the controller that emitted this Event, e.g. ` + "`kubernetes.io/kubelet`" + `. This field cannot be empty for new Events."},
"reportingInstance":{"type":"string","description":"reportingInstance is the ID of the controller instance, e.g. ` + "`kubelet-xyzf`" + `. This field cannot be empty for new Events and it can have at most 128 characters."},
"action":{"type":"string","description":"action is what action was taken/failed regarding to the regarding object. It is machine-readable. This field cannot be empty for new Events and it can have at most 128 characters."},
"reason":{"type":"string","description":"reason is why the action was taken. It is human-readable. This field cannot be empty for new Events and it can have at most 128 characters."},
"regarding":` + objectReferenceSchema + `,
"related":` + objectReferenceSchema + `,
"note":{"type":"string","description":"note is a human-readable description of the status of this operation. Maximal length of the note is 1kB, but libraries should be prepared to handle values up to 64kB."},
"type":{"type":"string","description":"type is the type of this event (Normal, Warning), new types could be added in the future. It is machine-readable. This field cannot be empty for new Events."},
"deprecatedSource":` + eventSourceSchema + `,
"deprecatedFirstTimestamp":{"type":"string","format":"date-time","description":"deprecatedFirstTimestamp is the deprecated field assuring backward compatibility with core.v1 Event type."},
"deprecatedLastTimestamp":{"type":"string","format":"date-time","description":"deprecatedLastTimestamp is the deprecated field assuring backward compatibility with core.v1 Event type."},
"deprecatedCount":{"type":"integer","format":"int32","description":"deprecatedCount is the deprecated field assuring backward compatibility with core.v1 Event type."}}}`),
		Protobuf:       eventsV1Message,
		PrinterColumns: eventColumns(eventsV1Fields),
		SelectableFields: []string{".regarding.kind", ".regarding.namespace", ".regarding.name",
			".regarding.uid", ".regarding.apiVersion", ".regarding.resourceVersion",
			".regarding.fieldPath", ".reason", ".reportingController", ".type"},
		FieldLabels: map[string]string{"deprecatedSource": ".deprecatedSource.component"},
		Admission:   []AdmissionHook{budget.hook()},
		Options:     eventsV1Options(opts),
		Strategy:    eventStrategy(eventsV1Fields, true),
		StoredAs: &StoredAs{
			Resource:   "events",
			FromStored: func(obj Object) (Object, error) { return convertEvent(obj, coreEventFields, eventsV1Fields) },
			ToStored:   func(obj Object) (Object, error) { return convertEvent(obj, eventsV1Fields, coreEventFields) },
		},
	}
}

// convertEvent renames the fields of an event from form from to form to,
// Kubernetes' conversion between core v1 and events.k8s.io/v1 events.
func convertEvent(obj Object, from, to eventFields) (Object, error) {
	if obj == nil {
		return nil, fmt.Errorf("no event")
	}
	src, dst := from.renames(), to.renames()
	moved := map[string]any{}
	for i := range src {
		if v, ok := obj[src[i][1]]; ok {
			moved[dst[i][1]] = v
			delete(obj, src[i][1])
		}
	}
	for k, v := range moved {
		obj[k] = v
	}
	obj["apiVersion"] = to.apiVersion
	obj["kind"] = "Event"
	return obj, nil
}

// eventsV1Options are eventsOptions with the name an event created through
// events.k8s.io/v1 must have: a DNS subdomain.
func eventsV1Options(opts EventOptions) Options {
	o := eventsOptions(opts)
	o.NameValidation = nil
	o.StandardFinalizers = true // events.k8s.io validates them; core v1 events do not
	return o
}
