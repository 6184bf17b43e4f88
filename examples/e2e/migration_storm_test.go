package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A write storm on the quickstart's widgets through example.dev/v1 and
// example.dev/v2 that keeps, for every widget, the content of its last
// acknowledged write, and checks every read against it. It follows the
// server across restarts (endpoint). Each widget is written by one worker
// only, so its last acknowledged write is what it must hold; a write whose
// answer was lost (the server died under it) is resolved by reading the
// widget back once a server answers: it must hold the acknowledged content
// or that write's.

// widgetState is what the storm writes and reads back: spec.size,
// spec.color, spec.tags and the annotation example.dev/finish in v1;
// spec.size, spec.appearance.color, spec.tags and spec.appearance.finish in v2.
type widgetState struct {
	Size   int64
	Color  string
	Finish string // "": none
	Tags   []string
}

func (s widgetState) equal(o widgetState) bool {
	return s.Size == o.Size && s.Color == o.Color && s.Finish == o.Finish && slices.Equal(s.Tags, o.Tags)
}

func (s widgetState) String() string {
	return fmt.Sprintf("{size %d color %q finish %q tags %q}", s.Size, s.Color, s.Finish, s.Tags)
}

// spec is s as the spec of version.
func (s widgetState) spec(version string) map[string]any {
	spec := map[string]any{"size": s.Size, "tags": s.Tags}
	if version == "v1" {
		spec["color"] = s.Color
		return spec
	}
	app := map[string]any{"color": s.Color}
	if s.Finish != "" {
		app["finish"] = s.Finish
	}
	spec["appearance"] = app
	return spec
}

// object is a new widget name holding s in version.
func (s widgetState) object(version, name string) []byte {
	md := map[string]any{"name": name}
	if version == "v1" && s.Finish != "" {
		md["annotations"] = map[string]string{"example.dev/finish": s.Finish}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "example.dev/" + version, "kind": "Widget", "metadata": md, "spec": s.spec(version)})
	return b
}

// mergePatch sets s's fields in version: through v1 the finish is left as
// it is, through v2 it is set or removed.
func (s widgetState) mergePatch(version string) []byte {
	spec := s.spec(version)
	if version == "v2" && s.Finish == "" {
		spec["appearance"].(map[string]any)["finish"] = nil
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

// widgetJSON is the part of a widget, in either version, the storm reads.
type widgetJSON struct {
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Size       int64    `json:"size"`
		Color      *string  `json:"color"`
		Tags       []string `json:"tags"`
		Appearance *struct {
			Color  *string `json:"color"`
			Finish *string `json:"finish"`
		} `json:"appearance"`
	} `json:"spec"`
}

// state is the widgetState of o, read through version, which must be o's
// apiVersion and have that version's fields only.
func (o widgetJSON) state(version string) (widgetState, error) {
	if o.APIVersion != "example.dev/"+version {
		return widgetState{}, fmt.Errorf("apiVersion %q read through %s", o.APIVersion, version)
	}
	s := widgetState{Size: o.Spec.Size, Tags: o.Spec.Tags}
	finish, hasFinish := o.Metadata.Annotations["example.dev/finish"]
	if version == "v1" {
		if o.Spec.Appearance != nil {
			return s, fmt.Errorf("v1 widget %s has v2's spec.appearance", o.Metadata.Name)
		}
		if o.Spec.Color != nil {
			s.Color = *o.Spec.Color
		}
		s.Finish = finish
		return s, nil
	}
	if o.Spec.Color != nil || hasFinish || o.Spec.Appearance == nil {
		return s, fmt.Errorf("v2 widget %s: spec.color %v, annotation example.dev/finish %v, spec.appearance %v: want v2's fields only",
			o.Metadata.Name, o.Spec.Color != nil, hasFinish, o.Spec.Appearance != nil)
	}
	if c := o.Spec.Appearance.Color; c != nil {
		s.Color = *c
	}
	if f := o.Spec.Appearance.Finish; f != nil {
		s.Finish = *f
	}
	return s, nil
}

func parseWidget(version string, body []byte) (widgetState, error) {
	var o widgetJSON
	if err := json.Unmarshal(body, &o); err != nil {
		return widgetState{}, fmt.Errorf("decoding a %s widget: %v: %.200s", version, err, body)
	}
	return o.state(version)
}

// endpoint is the server the storm writes to.
type endpoint struct {
	url    string
	client *http.Client
}

func endpointOf(s *server) *endpoint { return &endpoint{url: s.URL, client: s.client} }

// call sends a request. An error is a transport error: the request may or
// may not have been carried out.
func (e *endpoint) call(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, buf.Bytes(), nil
}

// storm is the shared state of the workers.
type storm struct {
	t   *testing.T
	ns  string
	cur atomic.Pointer[endpoint]
	seq atomic.Int64 // makes every written value unique

	acked, conflicts, unknown, failures atomic.Int64
}

func widgetsPath(ns, version string) string {
	return "/apis/example.dev/" + version + "/namespaces/" + ns + "/widgets"
}

// fail reports a broken promise; past the first 20 it only counts them.
func (st *storm) fail(format string, args ...any) {
	if st.failures.Add(1) <= 20 {
		st.t.Errorf(format, args...)
	}
}

// widgetRecord is one widget as its worker knows it.
type widgetRecord struct {
	name  string
	state widgetState // of its last acknowledged write
}

// stormWorker writes its own widgets, one request at a time.
type stormWorker struct {
	st      *storm
	rng     *rand.Rand
	prefix  string        // of the names of the widgets it creates
	pause   time.Duration // after each write of run
	created int
	own     []*widgetRecord // the widgets it has created (acknowledged)
}

func (st *storm) worker(id int, prefix string) *stormWorker {
	return &stormWorker{st: st, rng: rand.New(rand.NewPCG(uint64(id), 27)), prefix: prefix}
}

// values are fresh values for a write through version.
func (w *stormWorker) values(version string, create bool) widgetState {
	n := w.st.seq.Add(1)
	s := widgetState{Size: n, Color: "c" + strconv.FormatInt(n, 10), Tags: []string{"t" + strconv.FormatInt(n%5, 10), "storm"}}
	if (version == "v2" || create) && w.rng.IntN(3) > 0 {
		s.Finish = "f" + strconv.FormatInt(n, 10)
	}
	return s
}

func (w *stormWorker) version() string {
	return []string{"v1", "v2"}[w.rng.IntN(2)]
}

// run writes until stop ends: creates, merge patches, and reads followed by
// updates, through both versions.
func (w *stormWorker) run(ctx, stop context.Context) {
	for stop.Err() == nil && ctx.Err() == nil {
		switch p := w.rng.IntN(100); {
		case p < 15 || len(w.own) == 0:
			w.create(ctx)
		case p < 55:
			w.patch(ctx, w.own[w.rng.IntN(len(w.own))])
		default:
			w.replace(ctx, w.own[w.rng.IntN(len(w.own))])
		}
		time.Sleep(w.pause)
	}
}

// create creates a widget.
func (w *stormWorker) create(ctx context.Context) {
	v := w.version()
	name := fmt.Sprintf("%s-%d", w.prefix, w.created)
	w.created++
	s := w.values(v, true)
	code, body, err := w.st.cur.Load().call(ctx, http.MethodPost, widgetsPath(w.st.ns, v), "application/json", s.object(v, name))
	switch {
	case err != nil:
		w.resolve(ctx, &widgetRecord{name: name}, s, true)
	case code == http.StatusCreated:
		w.acknowledged(v, body, &widgetRecord{name: name}, s, "create")
		w.own = append(w.own, &widgetRecord{name: name, state: s})
	default:
		w.refused(code, body, "create "+v+" "+name)
	}
}

// patch merge-patches rec through a version.
func (w *stormWorker) patch(ctx context.Context, rec *widgetRecord) {
	v := w.version()
	next := w.values(v, false)
	if v == "v1" {
		next.Finish = rec.state.Finish // v1 does not touch the finish
	}
	code, body, err := w.st.cur.Load().call(ctx, http.MethodPatch, widgetsPath(w.st.ns, v)+"/"+rec.name, "application/merge-patch+json", next.mergePatch(v))
	switch {
	case err != nil:
		w.resolve(ctx, rec, next, false)
	case code == http.StatusOK:
		w.acknowledged(v, body, rec, next, "patch")
	default:
		w.refused(code, body, "patch "+v+" "+rec.name)
	}
}

// replace reads rec through a version, checks it holds its last
// acknowledged write, and updates it with that resourceVersion.
func (w *stormWorker) replace(ctx context.Context, rec *widgetRecord) {
	v := w.version()
	path := widgetsPath(w.st.ns, v) + "/" + rec.name
	ep := w.st.cur.Load()
	code, body, err := ep.call(ctx, http.MethodGet, path, "", nil)
	if err != nil || code != http.StatusOK {
		if err == nil {
			w.refused(code, body, "get "+v+" "+rec.name)
		}
		time.Sleep(20 * time.Millisecond) // the server is down: wait for the next one
		return
	}
	if got, err := parseWidget(v, body); err != nil || !got.equal(rec.state) {
		w.st.fail("GET %s %s read %v (%v); its last acknowledged write is %v", v, rec.name, got, err, rec.state)
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		w.st.fail("GET %s %s: %v", v, rec.name, err)
		return
	}
	next := w.values(v, false)
	if v == "v1" {
		next.Finish = rec.state.Finish // kept in the annotation the read returned
	}
	obj["spec"] = next.spec(v)
	put, _ := json.Marshal(obj)
	code, body, err = ep.call(ctx, http.MethodPut, path, "application/json", put)
	switch {
	case err != nil:
		w.resolve(ctx, rec, next, false)
	case code == http.StatusOK:
		w.acknowledged(v, body, rec, next, "update")
	default:
		w.refused(code, body, "update "+v+" "+rec.name)
	}
}

// acknowledged checks the answer to a write of want and records it.
func (w *stormWorker) acknowledged(version string, body []byte, rec *widgetRecord, want widgetState, verb string) {
	w.st.acked.Add(1)
	if got, err := parseWidget(version, body); err != nil || !got.equal(want) {
		w.st.fail("%s %s %s answered %v (%v), want %v", verb, version, rec.name, got, err, want)
	}
	rec.state = want
}

// refused counts a write the server refused: a conflict (the migration or
// a restart got in between) is expected, anything else is a failure.
func (w *stormWorker) refused(code int, body []byte, what string) {
	if code == http.StatusConflict {
		w.st.conflicts.Add(1)
		return
	}
	w.st.fail("%s: %d %.300s", what, code, body)
}

// resolve finds out whether a write of next to rec whose answer was lost
// was carried out, reading rec back (through v2) once a server answers: it
// must hold its last acknowledged write or next. For a create (rec never
// acknowledged), a missing widget means it was not created; one that was
// joins the worker's widgets.
func (w *stormWorker) resolve(ctx context.Context, rec *widgetRecord, next widgetState, create bool) {
	w.st.unknown.Add(1)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		code, body, err := w.st.cur.Load().call(ctx, http.MethodGet, widgetsPath(w.st.ns, "v2")+"/"+rec.name, "", nil)
		switch {
		case err != nil || code >= 500:
			time.Sleep(50 * time.Millisecond)
			continue
		case code == http.StatusNotFound && create:
			return
		case code != http.StatusOK:
			w.st.fail("after a lost answer, GET %s: %d %.300s", rec.name, code, body)
			return
		}
		got, err := parseWidget("v2", body)
		switch {
		case err != nil:
			w.st.fail("after a lost answer, GET %s: %v", rec.name, err)
		case got.equal(next):
			rec.state = next
			if create {
				w.own = append(w.own, rec)
			}
		case create || !got.equal(rec.state):
			w.st.fail("after a lost answer, %s holds %v: neither its last acknowledged write %v nor the unanswered one %v", rec.name, got, rec.state, next)
		}
		return
	}
	if ctx.Err() == nil { // not the test giving up
		w.st.fail("no server answered for 90s to resolve a write to %s", rec.name)
	}
}

// runWorkers runs fn for every worker and waits for them.
func runWorkers(ws []*stormWorker, fn func(*stormWorker)) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { fn(w) })
	}
	wg.Wait()
}
