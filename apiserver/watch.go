package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/watch"
)

// watchWriteTimeout bounds how long one write to a watch client may block: a
// client that reads nothing for that long is gone or hopelessly slow, and its
// watch ends (it resumes from its last resourceVersion).
const watchWriteTimeout = time.Minute

// handleWatch serves the watch verb: a stream of events in the negotiated
// representation, flushed as events come. Errors found before the stream
// starts are ordinary Status responses; afterwards they are ERROR events.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	enc, contentType, err := s.watchEncoder(r, st.Resource())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts, timeoutSeconds, err := s.watchOptions(r, st, info.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.watchesCtx.Err() != nil {
		s.writeError(w, r, shuttingDown())
		return
	}
	// The watch ends when the client goes, when timeoutSeconds runs out or
	// when the server ends watches (EndWatches).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.watchesCtx, cancel)()
	if n := timeoutSeconds; n < 0 {
		s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %d", n)))
		return
	} else if n > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
		defer cancel()
	}
	release, err := s.admitWatch(r, &opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	opts.Encoder = enc
	wt, err := st.Watch(ctx, info.Namespace, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer wt.Stop()
	dl := writeDeadliner{writeTimeout: time.Duration(s.writeTimeout.Load())}
	dl.deadline, dl.hasDeadline = ctx.Deadline()
	s.writeWatchResponse(w, r, contentType, wt, dl, cancel)
}

// watchOptions reads a watch's options and timeoutSeconds from its query. A
// watch of one object (GET .../NAME?watch=1) selects metadata.name=NAME.
func (s *Server) watchOptions(r *http.Request, st *registry.Store, name string) (registry.WatchOptions, int64, error) {
	lq, err := s.listOptions(queryOf(r), st)
	if err != nil {
		return registry.WatchOptions{}, 0, err
	}
	lo := lq.opts
	opts := registry.WatchOptions{
		Labels:            lo.Labels,
		Fields:            lo.Fields,
		ResourceVersion:   lo.ResourceVersion,
		AllowBookmarks:    lq.allowBookmarks,
		SendInitialEvents: lq.sendInitialEvents,
	}
	if name != "" {
		if opts.Fields, err = objectFieldSelector(lo.Fields, name); err != nil {
			return opts, 0, err
		}
	}
	if errs := validateWatchOptions(opts.SendInitialEvents, lo.ResourceVersionMatch, lo.Continue); len(errs) > 0 {
		return opts, 0, meta.NewInvalidOptions("ListOptions", errs)
	}
	return opts, lq.timeoutSeconds, nil
}

// objectFieldSelector is the field selector of a watch of the object name:
// metadata.name=name, with any field selector the query gives as well.
func objectFieldSelector(fields registry.FieldMatcher, name string) (registry.FieldMatcher, error) {
	var reqs []meta.FieldRequirement
	if fs, ok := fields.(meta.FieldSelector); ok {
		if v, found := fs.RequiresExactMatch("metadata.name"); found && v != name {
			return nil, meta.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
		}
		reqs = fs.Requirements()
	}
	reqs = append(reqs, meta.FieldRequirement{Field: "metadata.name", Operator: meta.FieldOpEquals, Value: name})
	return meta.NewFieldSelector(reqs...), nil
}

// shuttingDown is the answer to a watch after EndWatches: 503, try again
// (another instance, or this one after its restart).
func shuttingDown() *meta.StatusError {
	se := meta.NewServiceUnavailable("The server is shutting down, please try again later.")
	se.Status.Details = &meta.StatusDetails{RetryAfterSeconds: 1}
	se.RetryAfter = 1
	return se
}

// validateWatchOptions checks sendInitialEvents and resourceVersionMatch as
// kube-apiserver does for a watch.
func validateWatchOptions(sendInitialEvents *bool, match, continueToken string) meta.ErrorList {
	var errs meta.ErrorList
	if continueToken != "" {
		// A watch has no pages to continue: kube-apiserver answers 422.
		errs = append(errs, meta.Forbidden(meta.NewPath("continue"), "continue is forbidden for watch"))
	}
	if sendInitialEvents != nil && match != "NotOlderThan" {
		errs = append(errs, meta.Forbidden(meta.NewPath("resourceVersionMatch"),
			"sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
	}
	if match != "" {
		if sendInitialEvents == nil {
			errs = append(errs, meta.Forbidden(meta.NewPath("resourceVersionMatch"),
				"resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
		}
		if match != "NotOlderThan" {
			errs = append(errs, meta.NotSupported(meta.NewPath("resourceVersionMatch"), match, []string{"NotOlderThan"}))
		}
	}
	return errs
}

// writeWatchResponse sends the response header of a watch and streams wt's
// events: over HTTP/1.1 straight to the connection, taken over from the
// server (writeWatchConn), otherwise through w. cancel ends the watch.
func (s *Server) writeWatchResponse(w http.ResponseWriter, r *http.Request, contentType string, wt *watch.Watcher, dl writeDeadliner, cancel context.CancelFunc) {
	rc := http.NewResponseController(w)
	// An HTTP/1.1 stream is written straight to the connection when the
	// writer hands it over (see writeWatchConn); either way the connection
	// closes with the stream.
	direct := r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.Method == http.MethodGet
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Transfer-Encoding", "chunked") // HTTP/2 drops it
	if direct {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	if direct {
		if conn, _, err := rc.Hijack(); err == nil {
			s.writeWatchConn(r, conn, cancel, wt, dl)
			return
		}
	}
	_ = s.streamWatch(r, wt, 0, func(b []byte, shared []watch.SharedFrame) error {
		err := writePieces(b, 0, shared, func(p []byte) error {
			dl.bound(rc.SetWriteDeadline) // unsupported writers just block
			_, err := w.Write(p)
			return err
		})
		if err != nil {
			return err
		}
		return rc.Flush()
	})
}

// sharedFrameBytes is the size from which a watch frame is written from the
// watch cache's one encoding of its event instead of a copy in the
// watcher's batch: a client that stops reading then pins no copy of a large
// object, while small frames, the common case, still go out together in one
// write. 16 KiB is a TLS record: a frame this large costs its own records
// anyway.
const sharedFrameBytes = 16 << 10

// streamWatch hands wt's batches of frames to write until the watch ends
// (nil) or a write fails (its error). Each batch comes after room bytes
// that write may use for its framing; its large frames are shared (see
// watch.SharedFrame), written in between. The batches' buffer comes from
// the server's pool and goes back whenever the watcher has nothing to send
// (a busy watch keeps the one its batches grew): an idle watch holds none.
func (s *Server) streamWatch(r *http.Request, wt *watch.Watcher, room int, write func([]byte, []watch.SharedFrame) error) error {
	var shared []watch.SharedFrame
	var bp *[]byte // the batch buffer, while the watch holds one
	defer func() {
		if bp != nil {
			s.putWatchBuffer(bp)
		}
	}()
	for {
		if bp == nil {
			bp = s.watchBuffers.Get().(*[]byte)
		}
		buf, sh, err := wt.PollShared((*bp)[:room], shared[:0], sharedFrameBytes)
		shared = sh
		if err == nil && len(buf) == room && len(shared) == 0 {
			s.putWatchBuffer(bp)
			bp = nil
			wt.Wait()
			continue
		}
		if cap(buf) > maxKeptBuffer && len(buf) <= maxBatchCopy {
			// A large frame was encoded here and then shared: write from
			// the pooled buffer, not from the large one.
			buf = append((*bp)[:0], buf...)
		}
		if len(buf) > room || len(shared) > 0 {
			werr := write(buf, shared)
			clear(shared) // the frames may leave the cache: hold none of them
			if werr != nil {
				s.log.Debug("watch client write failed", "path", r.URL.Path, "error", werr)
				return werr
			}
		}
		if cap(buf) <= maxKeptBuffer {
			*bp = buf[:0]
		} else {
			// Leave a large frame's memory to the collector: its room
			// (watch.Room) is given back by the next PollShared.
			bp = nil
		}
		if err != nil {
			if !errors.Is(err, watch.ErrEnded) {
				s.log.Debug("watch ended", "path", r.URL.Path, "reason", err)
			}
			return nil
		}
	}
}

// newWatchBuffer is the watch buffer pool's New: a buffer for a batch of
// a few small frames, grown by append.
func newWatchBuffer() any {
	b := make([]byte, 0, 8<<10)
	return &b
}

// putWatchBuffer gives a watch's buffer back to the pool, unless a burst
// grew it: a watch that borrows a pooled buffer and then stalls holds no
// more than its own batch needed.
func (s *Server) putWatchBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		s.watchBuffers.Put(bp)
	}
}

// maxPooledBuffer bounds the buffers the watch buffer pool keeps.
const maxPooledBuffer = 32 << 10

// maxBatchCopy bounds what a batch of small frames holds: the watcher's
// batches stop growing past 64 KiB, and their frames are below
// sharedFrameBytes.
const maxBatchCopy = 64<<10 + sharedFrameBytes + chunkHeaderRoom

// maxKeptBuffer bounds the buffer a busy watch keeps from one batch to the
// next: room for a batch of small frames (maxBatchCopy), grown by append.
const maxKeptBuffer = 128 << 10

// writePieces writes b[from:] with the shared frames inserted at their
// offsets, in as few writes as they allow.
func writePieces(b []byte, from int, shared []watch.SharedFrame, write func([]byte) error) error {
	for _, f := range shared {
		if f.At > from {
			if err := write(b[from:f.At]); err != nil {
				return err
			}
			from = f.At
		}
		if err := write(f.Frame); err != nil {
			return err
		}
	}
	if from < len(b) {
		return write(b[from:])
	}
	return nil
}

// writeDeadliner bounds each write of a watch stream by the server's write
// timeout (and by the watch's own deadline, plus a second for its last
// frames), moving the connection's deadline only now and then: it costs a
// call into the network poller.
type writeDeadliner struct {
	writeTimeout time.Duration
	deadline     time.Time // of the watch
	hasDeadline  bool
	set          time.Time // the deadline set on the connection
}

func (d *writeDeadliner) bound(setWriteDeadline func(time.Time) error) {
	if now := time.Now(); d.set.Sub(now) < d.writeTimeout/2 {
		d.set = now.Add(d.writeTimeout)
		if d.hasDeadline && d.deadline.Before(d.set) {
			d.set = d.deadline.Add(time.Second)
		}
		_ = setWriteDeadline(d.set)
	}
}
