package watch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// EventType is the type of a watch event, as on the wire.
type EventType uint8

// Event types.
const (
	Added EventType = iota + 1
	Modified
	Deleted
	Bookmark
	Error
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Bookmark:
		return "BOOKMARK"
	case Error:
		return "ERROR"
	}
	return "UNKNOWN"
}

// Object is one version of one stored object. Objects are shared by the
// cache's state, its events and every watcher: callers must not modify them.
type Object struct {
	Key   []byte
	Value []byte
	// Revision is the revision the object was written at.
	Revision int64

	attrs  atomic.Pointer[attrsResult]
	enc    atomic.Pointer[encodingResult]
	frames atomic.Pointer[[]frame] // initial-event frames (Cache.keepInitialFrame)
}

type encodingResult struct {
	tag string
	b   []byte
}

// keptEncoding returns the encoding of o named tag, if o keeps it.
func (o *Object) keptEncoding(tag string) ([]byte, bool) {
	if r := o.enc.Load(); r != nil && r.tag == tag {
		return r.b, true
	}
	return nil, false
}

// keepEncoding keeps b as o's encoding named tag unless o keeps one already;
// it returns the encoding o keeps for tag (b, or the one another caller kept
// first) and whether b was kept.
func (o *Object) keepEncoding(tag string, b []byte) ([]byte, bool) {
	if o.enc.CompareAndSwap(nil, &encodingResult{tag: tag, b: b}) {
		return b, true
	}
	if kept, ok := o.keptEncoding(tag); ok {
		return kept, false
	}
	return b, false
}

// keptSize is the size of the encoding and the frames o keeps.
func (o *Object) keptSize() int64 {
	n := o.keptFrameSize()
	if r := o.enc.Load(); r != nil {
		n += int64(len(r.b))
	}
	return n
}

// keptFrameSize is the size of the frames o keeps.
func (o *Object) keptFrameSize() int64 {
	var n int64
	if p := o.frames.Load(); p != nil {
		for _, f := range *p {
			n += int64(len(f.b))
		}
	}
	return n
}

// forget drops what o keeps (its encoding and frames) once it has left the
// state: the budget no longer counts them, and the window's events may
// still hold o for minutes.
func (o *Object) forget() {
	o.enc.Store(nil)
	o.frames.Store(nil)
}

// maxObjectFrames bounds the initial-event frames an object keeps: one per
// representation a watch of its type asks for.
const maxObjectFrames = 4

// keptFrame returns the frame of o's initial event for enc (an encoder with
// the cache's id id, 0 for none), if o keeps it.
func (o *Object) keptFrame(enc Encoder, id uint32) ([]byte, bool) {
	return findFrame(o.frames.Load(), enc, id, Added)
}

// keepFrame keeps b as the frame of o's initial event for enc unless o
// keeps one already, or keeps maxObjectFrames; it returns the frame o keeps
// for enc (b, or the one kept first) and whether b was kept.
func (o *Object) keepFrame(enc Encoder, id uint32, b []byte) ([]byte, bool) {
	for {
		p := o.frames.Load()
		if kept, ok := findFrame(p, enc, id, Added); ok {
			return kept, false
		}
		var frames []frame
		if p != nil {
			frames = *p
		}
		if len(frames) >= maxObjectFrames {
			return b, false
		}
		next := append(frames[:len(frames):len(frames)], frame{enc: enc, id: id, typ: Added, b: b})
		if o.frames.CompareAndSwap(p, &next) {
			return b, true
		}
	}
}

// findFrame returns the frame of typ for enc among *p. Encoders with an id
// compare by it: comparing two encoder values compares their fields
// (strings, nested encoders), which hundreds of watchers would do for each
// event.
func findFrame(p *[]frame, enc Encoder, id uint32, typ EventType) ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	for i := range *p {
		if f := &(*p)[i]; f.typ == typ && f.id == id && (id != 0 || f.enc == enc) {
			return f.b, true
		}
	}
	return nil, false
}

type attrsResult struct {
	v   any
	err error
}

// objectOverhead approximates the memory of an Object and its map entry
// beyond its key and value.
const objectOverhead = 128

func (o *Object) size() int64 { return int64(len(o.Key) + len(o.Value) + objectOverhead) }

// attributes returns the filter attributes of o, computing them at most once
// (concurrent first calls may both compute; one result wins).
func (o *Object) attributes(fn func(key, value []byte) (any, error)) (any, error) {
	if r := o.attrs.Load(); r != nil {
		return r.v, r.err
	}
	if fn == nil {
		return nil, nil
	}
	v, err := fn(o.Key, o.Value)
	r := &attrsResult{v: v, err: err}
	if !o.attrs.CompareAndSwap(nil, r) {
		r = o.attrs.Load()
	}
	return r.v, r.err
}

// Encoder turns events into wire frames of one representation (JSON today;
// protobuf or Table later). A frame is everything written to the client for
// one event, framing included.
//
// Frames of change events are cached per event and per Encoder while the
// event is in the cache's window, so that an event reaching many watchers is
// encoded once per representation: an Encoder must therefore be a comparable
// value (a pointer, or a small struct of comparable fields) and equal
// Encoders must produce identical frames.
type Encoder interface {
	// AppendEvent appends the frame of an Added, Modified or Deleted event
	// whose object is obj, shown at resourceVersion rev (for Deleted, the
	// revision of the delete).
	AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error)
	// AppendBookmark appends the frame of a bookmark at rev; initialEventsEnd
	// marks the bookmark that ends the initial events of a streaming list.
	AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error)
	// AppendError appends the frame of an Error event.
	AppendError(dst []byte, err error) []byte
}

// PerWatchEncoder is an Encoder whose frames depend on the watch that uses
// it: it keeps per-watch state (a Table stream sends its column definitions
// in the first event only). Its frames are encoded for each watch and never
// cached, so it need not be comparable.
type PerWatchEncoder interface {
	Encoder
	// PerWatch marks the encoder; it does nothing.
	PerWatch()
}

// RestEncoder is a PerWatchEncoder whose per-watch state is only in its
// first frame (a Table stream's column definitions): once that frame is
// encoded, the watch's change events are the frames of Rest, which the cache
// caches per event and shares between watches as any Encoder's. Initial
// events, bookmarks and errors stay with the PerWatchEncoder.
type RestEncoder interface {
	PerWatchEncoder
	// FirstSent reports whether the first frame has been encoded. It is
	// called by the watch's consumer, which also encodes.
	FirstSent() bool
	// Rest returns the Encoder of the change events after the first frame,
	// a comparable value (see Encoder). A frame of Rest may be encoded once
	// and sent to every watch with an equal one.
	Rest() Encoder
}

// Event is one change in the cache: a create (Added), an update (Modified)
// or a delete (Deleted) of one key, with the object before and after.
type Event struct {
	Type     EventType
	Revision int64
	// Object is the new version (nil for Deleted).
	Object *Object
	// Prev is the version before the change (nil for Added).
	Prev *Object

	at   time.Time // when the cache received it
	size int64     // bytes of objects accounted to the window

	// frames are the cached frames: an immutable slice, replaced (under
	// mu) when a frame is added, so that the watchers of an event, which
	// all want the same frame, read it without taking a lock.
	frames   atomic.Pointer[[]frame]
	mu       sync.Mutex    // serializes encoding and caching
	detached bool          // not (or no longer) in a window: frames are not cached; under mu
	counter  *atomic.Int64 // the window's frame byte counter
}

type frame struct {
	enc Encoder
	id  uint32 // enc's id in the cache (0: none; compare enc)
	typ EventType
	b   []byte
}

// Key returns the key the event is about.
func (e *Event) Key() []byte {
	if e.Object != nil {
		return e.Object.Key
	}
	return e.Prev.Key
}

// appendFrame appends the frame of the event as typ for enc: Added and
// Modified show the new object, Deleted the previous one, all at the event's
// revision. Unless perWatch is set, the frame is encoded once per (Encoder,
// type) while the event is in the window; concurrent callers wait for the
// first one. id is the cache's id of enc (Cache.encoderID), 0 when it has
// none.
func (e *Event) appendFrame(dst []byte, enc Encoder, id uint32, typ EventType, perWatch bool) ([]byte, error) {
	if !perWatch {
		b, ok, err := e.frame(enc, id, typ)
		if err != nil || ok {
			return append(dst, b...), err
		}
	}
	n := len(dst)
	dst, err := enc.AppendEvent(dst, typ, e.frameObject(typ), e.Revision)
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// frameObject is the object the frame of the event as typ shows.
func (e *Event) frameObject(typ EventType) *Object {
	if typ == Deleted {
		return e.Prev
	}
	return e.Object
}

// frame returns the cached frame of the event as typ for enc, encoding and
// caching it first; ok is false, and nothing is encoded, when the event is
// not in a window (its frames are not cached). The frame is shared:
// callers must not modify it.
func (e *Event) frame(enc Encoder, id uint32, typ EventType) (_ []byte, ok bool, _ error) {
	if b, ok := e.cachedFrame(enc, id, typ); ok {
		return b, true, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.cachedFrame(enc, id, typ); ok {
		return b, true, nil
	}
	if e.detached {
		return nil, false, nil
	}
	obj := e.frameObject(typ)
	b, err := enc.AppendEvent(make([]byte, 0, len(obj.Value)+frameOverhead), typ, obj, e.Revision)
	if err != nil {
		return nil, false, err
	}
	var frames []frame
	if p := e.frames.Load(); p != nil {
		frames = *p
	}
	frames = append(frames[:len(frames):len(frames)], frame{enc: enc, id: id, typ: typ, b: b})
	e.frames.Store(&frames)
	e.counter.Add(int64(len(b)))
	return b, true, nil
}

// frameOverhead is room for what a frame adds to its object's value (the
// event's envelope, a resourceVersion), so that most frames are encoded
// with one allocation.
const frameOverhead = 256

// cachedFrame returns the cached frame of the event as typ for enc. A frame
// read just as the event is detached is still the right frame.
func (e *Event) cachedFrame(enc Encoder, id uint32, typ EventType) ([]byte, bool) {
	return findFrame(e.frames.Load(), enc, id, typ)
}

// detach drops the cached frames (the event left the window) and returns
// their size.
func (e *Event) detach() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	if p := e.frames.Swap(nil); p != nil {
		for _, f := range *p {
			n += int64(len(f.b))
		}
	}
	e.detached = true
	return n
}

// newEvent builds the event of a storage change. prev is the previous version
// when the caller knows it (the cache's state); otherwise it comes from the
// storage event, converted by conv when conv is set (Config.PrevValue).
func newEvent(sev *storage.Event, prev *Object, now time.Time, conv func(key, value []byte) []byte) *Event {
	ev := &Event{Revision: sev.Revision, at: now}
	if sev.Type == storage.EventPut {
		ev.Object = &Object{Key: sev.Key, Value: sev.Value, Revision: sev.Revision}
		ev.size = ev.Object.size()
	}
	if sev.PrevRevision != 0 || sev.Type == storage.EventDelete {
		if prev == nil || prev.Revision != sev.PrevRevision {
			value := sev.PrevValue
			if conv != nil && value != nil {
				value = conv(sev.Key, value)
			}
			prev = &Object{Key: sev.Key, Value: value, Revision: sev.PrevRevision}
		}
		ev.Prev = prev
	}
	switch {
	case sev.Type == storage.EventDelete:
		ev.Type = Deleted
		ev.size = ev.Prev.size()
	case ev.Prev == nil:
		ev.Type = Added
	default:
		ev.Type = Modified
	}
	return ev
}
