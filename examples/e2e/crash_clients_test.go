package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The crash soak's clients: writers, watchers and pagers. Each runs
// against one server until it is killed; watchers and pagers keep their
// place (a resourceVersion, a continue token) and carry on against the
// next server.

// soakWriter writes its objects of one kind, one request at a time, until
// a request gets no answer (the server was killed under it).
type soakWriter struct {
	m    *soakModel
	kind *soakKind
	objs []*soakObject
	rng  *rand.Rand
}

func (w *soakWriter) run(ctx context.Context, ep *endpoint) {
	for ctx.Err() == nil {
		o := w.objs[w.rng.IntN(len(w.objs))]
		api := w.kind.apis[w.rng.IntN(len(w.kind.apis))]
		wr, method, path, contentType, body := w.m.begin(o, api, w.rng)
		code, resp, err := ep.call(ctx, method, path, contentType, body)
		if err != nil {
			w.m.lost(wr)
			return
		}
		w.m.answered(wr, code, resp)
	}
}

// soakWatcher watches its kind through one API, from the revision of the
// last event or bookmark it received, across restarts. A 410 makes it
// re-list and watch from the list's revision, as an informer does.
type soakWatcher struct {
	m    *soakModel
	kind *soakKind
	api  soakAPI
	bit  uint
	rv   uint64
}

func (w *soakWatcher) run(ctx context.Context, ep *endpoint) {
	for ctx.Err() == nil {
		gone := w.watch(ctx, ep)
		switch {
		case ctx.Err() != nil:
			return
		case gone:
			w.relist(ctx, ep)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// watch watches from w.rv until the stream ends; gone is a 410.
func (w *soakWatcher) watch(ctx context.Context, ep *endpoint) (gone bool) {
	w.m.count(func(s *soakStats) { s.watchStarts++ })
	path := w.kind.collection(w.api, w.m.ns) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + strconv.FormatUint(w.rv, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.url+path, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ep.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return true
	}
	if resp.StatusCode != http.StatusOK {
		w.m.failf("watch %s from %d: %s", path, w.rv, resp.Status)
		return false
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string
			Object json.RawMessage
		}
		if err := dec.Decode(&ev); err != nil {
			return false // the server ended the stream or died
		}
		switch ev.Type {
		case "ERROR":
			var st struct {
				Code    int
				Message string
			}
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == http.StatusGone {
				return true
			}
			w.m.failf("watch %s from %d: error event %s", path, w.rv, ev.Object)
			return false
		case "BOOKMARK":
			var bm struct {
				Metadata struct{ ResourceVersion string }
			}
			_ = json.Unmarshal(ev.Object, &bm)
			rv, err := parseRV(bm.Metadata.ResourceVersion)
			if err != nil || rv < w.rv {
				w.m.failf("watch %s: bookmark at %q after %d (%v)", path, bm.Metadata.ResourceVersion, w.rv, err)
				return false
			}
			w.m.count(func(s *soakStats) { s.bookmarks++; w.m.note(rv) })
			w.rv = rv
		case "ADDED", "MODIFIED", "DELETED":
			obj, md, err := decodeSoakObject(ev.Object)
			if err != nil {
				w.m.failf("watch %s: %s event: %v", path, ev.Type, err)
				return false
			}
			if md.rv <= w.rv {
				w.m.failf("watch %s: %s event of %s at resourceVersion %d after %d: not increasing", path, ev.Type, md.name, md.rv, w.rv)
			}
			w.m.observe(w, ev.Type, obj, md)
			w.rv = max(w.rv, md.rv)
		default:
			w.m.failf("watch %s: event type %q", path, ev.Type)
			return false
		}
	}
}

// relist lists w's kind after a 410 and records the list.
func (w *soakWatcher) relist(ctx context.Context, ep *endpoint) {
	order := w.m.ackedSoFar()
	path := w.kind.collection(w.api, w.m.ns)
	code, body, err := ep.call(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return // the server died: the next watch from w.rv gets 410 again
	}
	if code != http.StatusOK {
		w.m.failf("re-list %s after 410: %d %.300s", path, code, body)
		return
	}
	rv, _, items, err := parseSoakList(w.kind, body)
	if err != nil {
		w.m.failf("re-list %s after 410: %v", path, err)
		return
	}
	l := soakList{kind: w.kind, what: "re-list of " + path + " after 410", rv: rv, items: map[string]soakItem{}}
	for _, it := range items {
		l.items[it.name] = it.soakItem
	}
	w.m.addList(l)
	w.m.relisted(w, rv, order)
	w.m.count(func(s *soakStats) { s.watchGone++ })
	w.rv = rv
}

// soakPager lists its kind in pages of 1 to 8 objects, one list after the
// other. Every page of a list must have the list's resourceVersion, and
// the names must increase from page to page (no object twice). A list cut
// by a kill is continued, with its continue token, on the next server.
type soakPager struct {
	m    *soakModel
	kind *soakKind
	rng  *rand.Rand

	// The list in progress.
	api      soakAPI
	cont     string
	rv       uint64
	last     string // the last name listed
	items    map[string]soakItem
	ep       *endpoint // the server of its last page
	restarts bool      // it has pages from an earlier server
}

func (p *soakPager) run(ctx context.Context, ep *endpoint) {
	for ctx.Err() == nil && p.page(ctx, ep) {
	}
}

// page asks for the next page; false when the server does not answer.
func (p *soakPager) page(ctx context.Context, ep *endpoint) bool {
	if p.cont == "" {
		p.api, p.rv, p.last, p.items, p.restarts = p.kind.apis[p.rng.IntN(len(p.kind.apis))], 0, "", map[string]soakItem{}, false
	} else if p.ep != ep && !p.restarts {
		p.restarts = true
		p.m.count(func(s *soakStats) { s.continuedAcrossRestart++ })
	}
	p.ep = ep
	path := p.kind.collection(p.api, p.m.ns) + "?limit=" + strconv.Itoa(1+p.rng.IntN(8))
	if p.cont != "" {
		path += "&continue=" + url.QueryEscape(p.cont)
	}
	code, body, err := ep.call(ctx, http.MethodGet, path, "", nil)
	switch {
	case err != nil:
		return false
	case code == http.StatusGone && p.cont != "":
		p.m.count(func(s *soakStats) { s.continueExpired++ })
		p.cont = ""
		return true
	case code != http.StatusOK:
		p.m.failf("paged list %s: %d %.300s", path, code, body)
		p.cont = ""
		return true
	}
	rv, cont, items, err := parseSoakList(p.kind, body)
	if err != nil {
		p.m.failf("paged list %s: %v", path, err)
		p.cont = ""
		return true
	}
	if p.cont != "" && rv != p.rv {
		p.m.failf("paged list %s: a page at resourceVersion %d, the list's first page was at %d (across a restart: %v)", path, rv, p.rv, p.restarts)
	}
	for _, it := range items {
		if it.name <= p.last {
			p.m.failf("paged list %s at %d: %s after %s (twice, or out of order; across a restart: %v)", path, rv, it.name, p.last, p.restarts)
		}
		if it.rv > rv {
			p.m.failf("paged list %s at %d: %s has resourceVersion %d, after the list's", path, rv, it.name, it.rv)
		}
		p.items[it.name], p.last = it.soakItem, it.name
	}
	p.rv, p.cont = rv, cont
	p.m.count(func(s *soakStats) { s.pages++ })
	if cont == "" {
		what := "paged list of " + p.kind.collection(p.api, p.m.ns)
		if p.restarts {
			what += " continued across a restart"
		}
		p.m.addList(soakList{kind: p.kind, what: what, rv: rv, items: p.items})
		p.m.count(func(s *soakStats) { s.lists++ })
	}
	return true
}

// namedItem is one object of a list.
type namedItem struct {
	name string
	soakItem
}

// parseSoakList reads a list of kind: its resourceVersion, continue token
// and objects.
func parseSoakList(k *soakKind, body []byte) (rv uint64, cont string, items []namedItem, err error) {
	var list struct {
		Metadata struct {
			ResourceVersion string
			Continue        string
		}
		Items []json.RawMessage
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, "", nil, fmt.Errorf("decoding a list: %v: %.200s", err, body)
	}
	if rv, err = parseRV(list.Metadata.ResourceVersion); err != nil {
		return 0, "", nil, fmt.Errorf("list: %v", err)
	}
	for _, raw := range list.Items {
		obj, md, err := decodeSoakObject(raw)
		if err != nil {
			return 0, "", nil, err
		}
		val, err := k.value(obj)
		if err != nil {
			return 0, "", nil, fmt.Errorf("listed %s: %v", md.name, err)
		}
		items = append(items, namedItem{md.name, soakItem{rv: md.rv, val: val}})
	}
	return rv, list.Metadata.Continue, items, nil
}

// count updates the figures.
func (m *soakModel) count(f func(*soakStats)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.stats)
}

// failf is fail for callers that do not hold mu.
func (m *soakModel) failf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail(format, args...)
}

// ackedSoFar is the number of writes acknowledged so far.
func (m *soakModel) ackedSoFar() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.orders
}
