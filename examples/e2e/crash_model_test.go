package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
)

// The crash soak's model of what the server must hold: every write it
// sent, with its outcome, per object. One writer writes each object, one
// request at a time, so an object's history is the sequence of its writes
// that were carried out, and its state is the last of them. A write whose
// answer was lost (the server was killed under it) is resolved after the
// restart by what the server holds: it must be that write or the one
// before it.

// writeState is what became of a write.
type writeState int

const (
	inFlight    writeState = iota // sent, not answered yet
	acked                         // answered with success
	lostAnswer                    // the server died before answering: done or not
	appliedLost                   // a lost answer whose write turned out done
	notApplied                    // a lost answer whose write turned out not done
	refused                       // answered with a refusal (429, the event budget)
)

// soakWrite is one write sent.
type soakWrite struct {
	obj   *soakObject
	op    string // create, update, patch, delete
	val   int64  // the value it writes; for a delete, the value it removes
	rv    uint64 // its revision: 0 until an answer or a watch event says (a delete's answer does not)
	state writeState
	seen  uint  // bit i: the kind's watcher i delivered it, or re-listed past it
	order int64 // when it was acknowledged, among all acknowledged writes
}

func (w *soakWrite) String() string {
	return fmt.Sprintf("%s %s/%s value %d rv %d", w.op, w.obj.kind.resource, w.obj.name, w.val, w.rv)
}

// soakObject is one object and its history.
type soakObject struct {
	kind     *soakKind
	name     string
	hist     []*soakWrite // the writes carried out, in order
	inflight *soakWrite   // sent and not answered, or answer lost and not resolved
}

// last is the object's last write carried out, nil if none.
func (o *soakObject) last() *soakWrite {
	if len(o.hist) == 0 {
		return nil
	}
	return o.hist[len(o.hist)-1]
}

func (o *soakObject) exists() bool {
	l := o.last()
	return l != nil && l.op != "delete"
}

// at is the object's last write at or before revision rv (nil: none); ok
// is false when a write whose revision is unknown makes it ambiguous.
func (o *soakObject) at(rv uint64) (w *soakWrite, ok bool) {
	j := len(o.hist) - 1
	for j >= 0 && (o.hist[j].rv == 0 || o.hist[j].rv > rv) {
		j--
	}
	// A delete of unknown revision right after the last write known to
	// be at or before rv may be on either side of rv.
	if j+1 < len(o.hist) && o.hist[j+1].rv == 0 {
		return nil, false
	}
	if j < 0 {
		return nil, true
	}
	return o.hist[j], true
}

// soakItem is one object of a list: its revision and value.
type soakItem struct {
	rv  uint64
	val int64
}

// soakList is a complete list of a kind (all its pages) at one revision,
// checked against the histories once every revision in it is known.
type soakList struct {
	kind  *soakKind
	what  string
	rv    uint64
	items map[string]soakItem
}

// soakStats are the figures the soak reports.
type soakStats struct {
	acked, lost, appliedLost, refused                     int64
	events, bookmarks, watchStarts, watchGone             int64
	lists, pages, continuedAcrossRestart, continueExpired int64
}

// soakModel is the shared state of the writers, watchers and pagers.
type soakModel struct {
	t     *testing.T
	ns    string
	kinds []*soakKind

	mu       sync.Mutex
	objects  map[string]*soakObject // by resource/name
	byVal    map[int64]*soakWrite   // creates, updates and patches by the value they write
	delByVal map[int64]*soakWrite   // deletes by the value they remove
	byRV     map[uint64]*soakWrite
	unseen   map[*soakWrite]bool // writes carried out that some watcher has not delivered
	lists    []soakList
	seq      int64  // the last value handed out
	orders   int64  // acknowledged writes so far
	maxRV    uint64 // the largest revision seen in any answer, event or list
	floor    uint64 // maxRV when the running server started: every new write is above it
	stats    soakStats
	failures int
}

func newSoakModel(t *testing.T, ns string) *soakModel {
	return &soakModel{
		t: t, ns: ns, kinds: soakKinds(ns),
		objects: map[string]*soakObject{}, byVal: map[int64]*soakWrite{}, delByVal: map[int64]*soakWrite{},
		byRV: map[uint64]*soakWrite{}, unseen: map[*soakWrite]bool{},
	}
}

// fail reports a broken promise; past the first 30 it only counts them.
// Callers hold mu.
func (m *soakModel) fail(format string, args ...any) {
	m.failures++
	if m.failures <= 30 {
		m.t.Errorf(format, args...)
	}
}

// note records a revision seen anywhere. Callers hold mu.
func (m *soakModel) note(rv uint64) { m.maxRV = max(m.maxRV, rv) }

func (m *soakModel) object(k *soakKind, name string) *soakObject {
	key := k.resource + "/" + name
	o := m.objects[key]
	if o == nil {
		o = &soakObject{kind: k, name: name}
		m.objects[key] = o
	}
	return o
}

// begin picks the next write to o through api and returns the request: a
// create if o does not exist, else an update (with o's resourceVersion), a
// merge patch or a delete.
func (m *soakModel) begin(o *soakObject, api soakAPI, rng *rand.Rand) (wr *soakWrite, method, path, contentType string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wr = &soakWrite{obj: o, state: inFlight}
	o.inflight = wr
	coll := o.kind.collection(api, m.ns)
	p := rng.IntN(100)
	switch {
	case !o.exists():
		wr.op, method, path = "create", http.MethodPost, coll
	case p < 40:
		wr.op, method, path = "update", http.MethodPut, coll+"/"+o.name
	case p < 80:
		wr.op, method, path = "patch", http.MethodPatch, coll+"/"+o.name
	default:
		wr.op, method, path = "delete", http.MethodDelete, coll+"/"+o.name
		wr.val = o.last().val
		m.delByVal[wr.val] = wr
		return wr, method, path, "", nil
	}
	m.seq++
	wr.val = m.seq
	m.byVal[wr.val] = wr
	obj := o.kind.fields(wr.val)
	contentType = "application/json"
	if wr.op == "patch" {
		contentType = "application/merge-patch+json"
	} else {
		md := map[string]any{"name": o.name}
		if wr.op == "update" {
			md["resourceVersion"] = fmt.Sprint(o.last().rv)
		}
		obj["apiVersion"], obj["kind"], obj["metadata"] = api.apiVersion, o.kind.kind, md
	}
	body, _ = json.Marshal(obj)
	return wr, method, path, contentType, body
}

// answered records the server's answer to wr.
func (m *soakModel) answered(wr *soakWrite, code int, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := wr.obj
	o.inflight = nil
	want := http.StatusOK
	if wr.op == "create" {
		want = http.StatusCreated
	}
	switch {
	case code == want:
	case code == http.StatusTooManyRequests || o.kind.budgeted && code == http.StatusServiceUnavailable:
		m.stats.refused++
		wr.state = refused
		if wr.rv != 0 {
			m.fail("%v was refused (%d), but a watch delivered it", wr, code)
		}
		return
	default:
		wr.state = refused
		m.fail("%v: %d %.300s", wr, code, body)
		return
	}
	if wr.op != "delete" {
		obj, md, err := decodeSoakObject(body)
		if err != nil {
			m.fail("%v answered: %v", wr, err)
			return
		}
		if val, err := o.kind.value(obj); err != nil || val != wr.val {
			m.fail("%v answered value %d (%v)", wr, val, err)
		}
		if md.rv <= m.floor {
			m.fail("%v answered resourceVersion %d, not above %d, the largest seen before the server (re)started", wr, md.rv, m.floor)
		}
		m.setRV(wr, md.rv)
	}
	m.stats.acked++
	m.orders++
	wr.state, wr.order = acked, m.orders
	o.hist = append(o.hist, wr)
	m.track(wr)
}

// lost records that wr's answer was lost: it stays o's inflight write
// until resolve.
func (m *soakModel) lost(wr *soakWrite) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wr.state = lostAnswer
	m.stats.lost++
}

// setRV records wr's revision, from an answer or a watch event. Callers
// hold mu.
func (m *soakModel) setRV(wr *soakWrite, rv uint64) {
	m.note(rv)
	if wr.rv != 0 {
		if wr.rv != rv {
			m.fail("%v seen again at resourceVersion %d", wr, rv)
		}
		return
	}
	if other := m.byRV[rv]; other != nil {
		m.fail("%v and %v have the same resourceVersion", wr, other)
	}
	wr.rv = rv
	m.byRV[rv] = wr
}

// track adds a write carried out to the ones every watcher of its kind
// must deliver. Callers hold mu.
func (m *soakModel) track(wr *soakWrite) {
	if wr.seen != fullMask(wr.obj.kind) {
		m.unseen[wr] = true
	}
}

func fullMask(k *soakKind) uint { return 1<<len(k.watchers) - 1 }

// observe checks a watch event of w's kind against the histories: its
// value must be one written to that object by a write of the event's
// type, at the event's revision, that was not refused.
func (m *soakModel) observe(w *soakWatcher, typ string, obj map[string]any, md soakMeta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.events++
	k := w.kind
	val, err := k.value(obj)
	if err != nil {
		m.fail("watch %s: %s event of %s: %v", w.api.path, typ, md.name, err)
		return
	}
	wr, op := m.byVal[val], map[string]string{"ADDED": "create", "MODIFIED": "update", "DELETED": "delete"}[typ]
	if typ == "DELETED" {
		wr = m.delByVal[val]
	}
	switch {
	case wr == nil || wr.obj.kind != k || wr.obj.name != md.name:
		m.fail("watch %s %s: %s event of %s at %d with value %d, which was never written to it (or is older than its last write before the last restart)", k.resource, w.api.path, typ, md.name, md.rv, val)
		return
	case wr.op != op && !(op == "update" && wr.op == "patch"):
		m.fail("watch %s %s: %s event at %d for %v", k.resource, w.api.path, typ, md.rv, wr)
	case wr.state == refused || wr.state == notApplied:
		m.fail("watch %s %s: %s event at %d for %v, which was not carried out", k.resource, w.api.path, typ, md.rv, wr)
	}
	m.setRV(wr, md.rv)
	wr.seen |= w.bit
	if wr.seen == fullMask(k) {
		delete(m.unseen, wr)
	}
}

// relisted records that w listed its kind at rv after a 410: the writes it
// had not delivered up to there are covered by that list (which is checked
// against the histories like any other). Deletes whose revision is still
// unknown count as covered if they were acknowledged before the list was
// asked for (order).
func (m *soakModel) relisted(w *soakWatcher, rv uint64, order int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for wr := range m.unseen {
		if wr.obj.kind == w.kind && (wr.rv != 0 && wr.rv <= rv || wr.rv == 0 && wr.state == acked && wr.order <= order) {
			wr.seen |= w.bit
			if wr.seen == fullMask(w.kind) {
				delete(m.unseen, wr)
			}
		}
	}
}

// addList records a complete list for checkLists.
func (m *soakModel) addList(l soakList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.note(l.rv)
	m.lists = append(m.lists, l)
}

// checkLists checks every recorded list against the histories: at its
// revision each object holds its last write at or before it. Lists with an
// object whose history there is ambiguous (a delete whose revision no
// watcher told) are checked for the other objects.
func (m *soakModel) checkLists() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lists {
		for key, o := range m.objects {
			if o.kind != l.kind {
				continue
			}
			wr, ok := o.at(l.rv)
			if !ok {
				continue
			}
			item, listed := l.items[o.name]
			switch {
			case (wr == nil || wr.op == "delete") && listed:
				m.fail("%s at %d lists %s (rv %d, value %d), which did not exist then (its last write up to there: %v)", l.what, l.rv, key, item.rv, item.val, wr)
			case wr != nil && wr.op != "delete" && !listed:
				m.fail("%s at %d misses %s, whose last write up to there is %v", l.what, l.rv, key, wr)
			case listed && (item.rv != wr.rv || item.val != wr.val):
				m.fail("%s at %d lists %s at rv %d value %d, its last write up to there is %v", l.what, l.rv, key, item.rv, item.val, wr)
			}
		}
		for name := range l.items {
			if m.objects[l.kind.resource+"/"+name] == nil {
				m.fail("%s at %d lists %s/%s, which was never written", l.what, l.rv, l.kind.resource, name)
			}
		}
	}
	m.lists = nil
}

// prune forgets the writes that no list or watch event can show any more,
// so that a long run stays small: once the lists have been checked and the
// watches have delivered everything, each object's writes before its last
// one at or before keep (the revision of the oldest list still in
// progress, if any).
func (m *soakModel) prune(keep uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.objects {
		j := len(o.hist) - 1
		for j > 0 && (o.hist[j].rv == 0 || o.hist[j].rv > keep) {
			j--
		}
		for _, wr := range o.hist[:max(j, 0)] {
			if m.byVal[wr.val] == wr {
				delete(m.byVal, wr.val)
			}
			if m.delByVal[wr.val] == wr {
				delete(m.delByVal, wr.val)
			}
			delete(m.byRV, wr.rv)
		}
		o.hist = o.hist[max(j, 0):]
	}
}

// resolve checks, after a restart, the objects of k as the server holds
// them (items, listed through api at rv): each holds its last write, or,
// if its last write's answer was lost, that write or the one before; that
// write is then known to be carried out or not. Nothing else is there.
func (m *soakModel) resolve(k *soakKind, api soakAPI, rv uint64, items map[string]soakItem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rv < m.floor {
		m.fail("after the restart %s lists at resourceVersion %d, below %d seen before", k.resource, rv, m.floor)
	}
	for name := range items {
		if m.objects[k.resource+"/"+name] == nil {
			m.fail("after the restart %s/%s exists (value %d), but was never written", k.resource, name, items[name].val)
		}
	}
	for key, o := range m.objects {
		if o.kind != k {
			continue
		}
		item, listed := items[o.name]
		holds := func(wr *soakWrite) bool {
			if wr == nil || wr.op == "delete" {
				return !listed
			}
			return listed && item.val == wr.val && item.rv == wr.rv
		}
		wr := o.inflight
		if wr == nil {
			if !holds(o.last()) {
				m.fail("after the restart %s (%s) is listed %v, rv %d, value %d; its last acknowledged write is %v",
					key, api.path, listed, item.rv, item.val, o.last())
			}
			continue
		}
		// A lost answer: the write may or may not have been carried out.
		if wr.state != lostAnswer {
			m.fail("resolving %v in state %d", wr, wr.state)
		}
		applied := listed && wr.op != "delete" && item.val == wr.val || !listed && wr.op == "delete"
		switch {
		case applied:
			if wr.op != "delete" {
				m.setRV(wr, item.rv)
			}
			wr.state = appliedLost
			m.stats.appliedLost++
			o.hist = append(o.hist, wr)
			m.track(wr)
		case holds(o.last()):
			wr.state = notApplied
			if wr.rv != 0 {
				m.fail("after the restart %s does not hold %v, which a watch delivered before the crash", key, wr)
			}
		default:
			m.fail("after the restart %s is listed %v, rv %d, value %d: neither its last acknowledged write %v nor the unanswered %v",
				key, listed, item.rv, item.val, o.last(), wr)
		}
		o.inflight = nil
	}
}
