package registry

import (
	"fmt"

	"github.com/kapi-dev/kapi/meta"
)

// Length limits of Kubernetes' event validation.
const (
	eventReportingInstanceLimit = 128
	eventActionLimit            = 128
	eventReasonLimit            = 128
	eventNoteLimit              = 1024
)

// validateEvent is Kubernetes' ValidateEventCreate of an event in form f:
// the checks of every event, and with strict those of events written
// through events.k8s.io/v1.
func validateEvent(obj Object, f eventFields, strict bool) meta.ErrorList {
	str := func(path ...string) string { s, _ := nestedValue(obj, path...).(string); return s }
	ns := str("metadata", "namespace")
	involvedNS := str(f.regarding, "namespace")
	nsPath := meta.NewPath("involvedObject", "namespace")
	var errs meta.ErrorList
	if str("eventTime") == "" {
		// An event of the old API: its namespace and its object's agree.
		if involvedNS == "" && ns != "" && ns != "default" || involvedNS != "" && involvedNS != ns {
			errs = append(errs, meta.Invalid(nsPath, involvedNS, "does not match event.namespace"))
		}
	} else {
		if involvedNS == "" && ns != "default" && ns != "kube-system" {
			errs = append(errs, meta.Invalid(nsPath, involvedNS, "does not match event.namespace"))
		}
		errs = append(errs, validateReportedEvent(str, f)...)
	}
	for _, msg := range meta.IsDNS1123Subdomain(ns) {
		errs = append(errs, meta.Invalid(meta.NewPath("namespace"), ns, msg))
	}
	if strict {
		errs = append(errs, validateStrictEvent(obj, str, f)...)
	}
	return errs
}

// validateReportedEvent checks what an event with an eventTime (one of the
// new API) must say about who reported it and why.
func validateReportedEvent(str func(...string) string, f eventFields) meta.ErrorList {
	var errs meta.ErrorList
	rc := meta.NewPath(f.reportingController)
	if c := str(f.reportingController); c == "" {
		errs = append(errs, meta.Required(rc, ""))
	} else {
		for _, msg := range meta.IsQualifiedName(c) {
			errs = append(errs, meta.Invalid(rc, c, msg))
		}
	}
	for _, l := range []struct {
		field string
		limit int
	}{{"reportingInstance", eventReportingInstanceLimit}, {"action", eventActionLimit}, {"reason", eventReasonLimit}} {
		switch v := str(l.field); {
		case v == "":
			errs = append(errs, meta.Required(meta.NewPath(l.field), ""))
		case len(v) > l.limit:
			errs = append(errs, meta.Invalid(meta.NewPath(l.field), "", fmt.Sprintf("can have at most %d characters", l.limit)))
		}
	}
	if len(str(f.note)) > eventNoteLimit {
		errs = append(errs, meta.Invalid(meta.NewPath("message"), "", fmt.Sprintf("can have at most %d characters", eventNoteLimit)))
	}
	return errs
}

// validateStrictEvent is what an event created through events.k8s.io/v1
// must be besides: an eventTime, a known type, a valid series, and none of
// the deprecated fields of the old API.
func validateStrictEvent(obj Object, str func(...string) string, f eventFields) meta.ErrorList {
	var errs meta.ErrorList
	errs = append(errs, validateEventSeries(obj)...)
	if str("eventTime") == "" {
		errs = append(errs, meta.Required(meta.NewPath("eventTime"), ""))
	}
	if t := str("type"); t != EventTypeNormal && t != EventTypeWarning {
		errs = append(errs, meta.Invalid(meta.NewPath("type"), "", "has invalid value: "+t))
	}
	for _, field := range []string{f.first, f.last} {
		if str(field) != "" {
			errs = append(errs, meta.Invalid(meta.NewPath(field), "", "needs to be unset"))
		}
	}
	if n, _ := meta.AsInt64(obj[f.count]); n != 0 {
		errs = append(errs, meta.Invalid(meta.NewPath(f.count), "", "needs to be unset"))
	}
	if str(f.source, "component") != "" || str(f.source, "host") != "" {
		errs = append(errs, meta.Invalid(meta.NewPath(f.source), "", "needs to be unset"))
	}
	return errs
}

// validateEventSeries checks a series: at least two occurrences, and when
// the last was seen.
func validateEventSeries(obj Object) meta.ErrorList {
	series, ok := obj["series"].(map[string]any)
	if !ok {
		return nil
	}
	var errs meta.ErrorList
	if n, _ := meta.AsInt64(series["count"]); n < 2 {
		errs = append(errs, meta.Invalid(meta.NewPath("series", "count"), "", "should be at least 2"))
	}
	if s, _ := series["lastObservedTime"].(string); s == "" {
		errs = append(errs, meta.Required(meta.NewPath("series", "lastObservedTime"), ""))
	}
	return errs
}

// validateEventUpdate is what an update through events.k8s.io/v1 may not
// change: everything but the series (checked again when it changes) and
// metadata.
func validateEventUpdate(obj, old Object, f eventFields) meta.ErrorList {
	var errs meta.ErrorList
	if !meta.DeepEqual(obj["series"], old["series"]) {
		errs = append(errs, validateEventSeries(obj)...)
	}
	// Kubernetes validates the internal event, so errors name its fields
	// (involvedObject, message, ...) whichever view the update came through.
	core := coreEventFields
	for _, pair := range [][2]string{{f.regarding, core.regarding}, {"reason", "reason"}, {f.note, core.note}, {f.source, core.source},
		{f.first, core.first}, {f.last, core.last}, {f.count, core.count}, {"type", "type"}, {"eventTime", "eventTime"},
		{"action", "action"}, {"related", "related"}, {f.reportingController, "reportingController"}, {"reportingInstance", "reportingInstance"}} {
		if !meta.DeepEqual(obj[pair[0]], old[pair[0]]) {
			errs = append(errs, meta.Invalid(meta.NewPath(pair[1]), obj[pair[0]], "field is immutable"))
		}
	}
	return errs
}
