package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Custom subresources of widgets (see docs/extension.md), served in both
// versions (VERSION is v1 or v2), as a CRD serves its subresources per
// version:
//
//	POST /apis/example.dev/VERSION/namespaces/NS/widgets/NAME/restart   an action
//	GET  /apis/example.dev/VERSION/namespaces/NS/widgets/NAME/log       a stream (?follow=true)
//	GET  /apis/example.dev/VERSION/namespaces/NS/widgets/NAME/health    a computed view

// restartedAtAnnotation is what widgets/restart bumps.
const restartedAtAnnotation = "example.dev/restartedAt"

// WidgetRestart is the body of widgets/restart (an empty body will do).
type WidgetRestart struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Reason        string          `json:"reason,omitempty" kapi:"maxLength=256" doc:"Why the widget is restarted (recorded in an annotation)."`
}

// WidgetHealth is the computed answer of widgets/health.
type WidgetHealth struct {
	meta.TypeMeta   `json:",inline"`
	Metadata        meta.ObjectMeta `json:"metadata"`
	Healthy         bool            `json:"healthy"`
	Message         string          `json:"message"`
	DesiredReplicas int64           `json:"desiredReplicas"`
	ReadyReplicas   int64           `json:"readyReplicas"`
}

// widgetSubresources returns restart, log and health for one version of
// widgets: each works on the object in that version (req.Store and
// req.Parent are the version's), and its request and answer kinds are the
// version's.
func widgetSubresources(version string) (map[string]registry.Subresource, error) {
	restart, err := schema.For[WidgetRestart]()
	if err != nil {
		return nil, fmt.Errorf("deriving the schema of WidgetRestart: %w", err)
	}
	return map[string]registry.Subresource{
		"restart": {
			Kind:   meta.GroupVersionKind{Group: "example.dev", Version: version, Kind: "WidgetRestart"},
			Schema: restart,
			Create: restartWidget,
		},
		"log": {
			Stream: widgetLog,
		},
		"health": {
			Kind: meta.GroupVersionKind{Group: "example.dev", Version: version, Kind: "WidgetHealth"},
			Get:  widgetHealth,
		},
	}, nil
}

// restartWidget bumps the widget's example.dev/restartedAt annotation
// through the store (watchers see a MODIFIED event; a dry run changes
// nothing) and answers with the updated widget.
func restartWidget(ctx context.Context, req *registry.Request, body registry.Object) (registry.Object, error) {
	reason, _ := body["reason"].(string)
	for attempt := 0; ; attempt++ {
		w, err := req.Store.GetObject(ctx, req.Namespace, req.Name)
		if err != nil {
			return nil, err
		}
		md := w["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[restartedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		if reason != "" {
			ann["example.dev/restartReason"] = reason
		} else {
			delete(ann, "example.dev/restartReason")
		}
		res, err := req.Store.Update(ctx, req.Namespace, req.Name, w, registry.WriteOptions{DryRun: req.DryRun, FieldManager: "widget-restart"})
		if meta.ReasonOf(err) == meta.StatusReasonConflict && attempt < 5 {
			continue // changed meanwhile: restart the newer object
		}
		if err != nil {
			return nil, err
		}
		return res.Object, nil
	}
}

// widgetLog writes a few lines about the widget; with ?follow=true it then
// writes a line for every change, until the widget is deleted or the client
// goes away.
func widgetLog(ctx context.Context, req *registry.Request, w io.Writer) error {
	obj := req.Parent
	created, _, _ := meta.NestedString(obj, "metadata", "creationTimestamp")
	if _, err := fmt.Fprintf(w, "%s created widget %s\n", created, meta.GetName(obj)); err != nil {
		return err
	}
	if _, err := io.WriteString(w, logLine(obj)); err != nil {
		return err
	}
	if req.Query.Get("follow") != "true" {
		return nil
	}
	// From the version read: no change between the read and the watch is lost.
	events, err := req.Store.WatchObject(ctx, req.Namespace, req.Name, meta.GetResourceVersion(obj))
	if err != nil {
		return err
	}
	for ev := range events {
		line := logLine(ev.Object)
		if ev.Type == "DELETED" {
			line = fmt.Sprintf("%s widget %s deleted\n", time.Now().UTC().Format(time.RFC3339), meta.GetName(ev.Object))
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
	return nil
}

// logLine describes one state of a widget, in v1 (spec.color) or v2
// (spec.appearance.color).
func logLine(obj registry.Object) string {
	size, _, _ := meta.NestedField(obj, "spec", "size")
	color, ok, _ := meta.NestedString(obj, "spec", "color")
	if !ok {
		color, _, _ = meta.NestedString(obj, "spec", "appearance", "color")
	}
	phase, _, _ := meta.NestedString(obj, "status", "phase")
	restarted, _, _ := meta.NestedString(obj, "metadata", "annotations", restartedAtAnnotation)
	line := fmt.Sprintf("%s widget %s resourceVersion=%s generation=%d size=%v color=%q phase=%q",
		time.Now().UTC().Format(time.RFC3339), meta.GetName(obj), meta.GetResourceVersion(obj), meta.GetGeneration(obj), size, color, phase)
	if restarted != "" {
		line += " restartedAt=" + restarted
	}
	return line + "\n"
}

// widgetHealth computes the widget's health from its spec and status.
func widgetHealth(_ context.Context, req *registry.Request) (registry.Object, error) {
	obj := req.Parent
	desired, ok, _ := meta.NestedField(obj, "spec", "replicas")
	want, _ := meta.AsInt64(desired)
	if !ok {
		want = 1
	}
	readyRaw, _, _ := meta.NestedField(obj, "status", "replicas")
	ready, _ := meta.AsInt64(readyRaw)
	h := WidgetHealth{Healthy: ready >= want, DesiredReplicas: want, ReadyReplicas: ready}
	h.Metadata.Name, h.Metadata.Namespace = req.Name, req.Namespace
	h.Message = fmt.Sprintf("%d of %d replicas ready", ready, want)
	var out registry.Object
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(b, &out)
}
