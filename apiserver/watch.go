package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/watch"
)

// watchWriteTimeout bounds how long one write to a watch client may block: a
// client that reads nothing for that long is gone or hopelessly slow, and its
// watch ends (it resumes from its last resourceVersion).
const watchWriteTimeout = time.Minute

// handleWatch serves the watch verb: a stream of newline-delimited JSON
// events, chunked and flushed as events come. Errors found before the stream
// starts are ordinary Status responses; afterwards they are ERROR events.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	enc, contentType, err := s.watchEncoder(r, st.Resource())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq, err := s.listOptions(queryOf(r), st)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lo := lq.opts
	opts := registry.WatchOptions{
		Labels:            lo.Labels,
		Fields:            lo.Fields,
		ResourceVersion:   lo.ResourceVersion,
		AllowBookmarks:    lq.allowBookmarks,
		SendInitialEvents: lq.sendInitialEvents,
	}
	if info.Name != "" {
		// GET .../NAME?watch=1 watches one object: metadata.name=NAME, with
		// any field selector given as well.
		var reqs []meta.FieldRequirement
		if fs, ok := lo.Fields.(meta.FieldSelector); ok {
			if v, found := fs.RequiresExactMatch("metadata.name"); found && v != info.Name {
				s.writeError(w, r, meta.NewBadRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
			reqs = fs.Requirements()
		}
		reqs = append(reqs, meta.FieldRequirement{Field: "metadata.name", Operator: meta.FieldOpEquals, Value: info.Name})
		opts.Fields = meta.NewFieldSelector(reqs...)
	}
	if errs := validateWatchOptions(opts.SendInitialEvents, lo.ResourceVersionMatch, lo.Continue); len(errs) > 0 {
		s.writeError(w, r, meta.NewInvalidOptions("ListOptions", errs))
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
	if n := lq.timeoutSeconds; n < 0 {
		s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %d", n)))
		return
	} else if n > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
		defer cancel()
	}
	opts.Encoder = enc
	wt, err := st.Watch(ctx, info.Namespace, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer wt.Stop()

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
	dl := writeDeadliner{writeTimeout: time.Duration(s.writeTimeout.Load())}
	dl.deadline, dl.hasDeadline = ctx.Deadline()
	if direct {
		if conn, _, err := rc.Hijack(); err == nil {
			s.writeWatchConn(r, conn, cancel, wt, dl)
			return
		}
	}
	_ = s.streamWatch(r, wt, 0, func(b []byte) error {
		dl.bound(rc.SetWriteDeadline) // unsupported writers just block
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	})
}

// streamWatch hands wt's batches of frames to write until the watch ends
// (nil) or a write fails (its error). Each batch comes after room bytes
// that write may use for its framing.
func (s *Server) streamWatch(r *http.Request, wt *watch.Watcher, room int, write func([]byte) error) error {
	buf := make([]byte, room, 8<<10)
	for {
		var err error
		buf, err = wt.Next(buf[:room])
		if len(buf) > room {
			if werr := write(buf); werr != nil {
				s.log.Debug("watch client write failed", "path", r.URL.Path, "error", werr)
				return werr
			}
		}
		if err != nil {
			if !errors.Is(err, watch.ErrEnded) {
				s.log.Debug("watch ended", "path", r.URL.Path, "reason", err)
			}
			return nil
		}
		if cap(buf) > 256<<10 {
			buf = make([]byte, room, 8<<10) // give back the memory of a huge frame
		}
	}
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

// chunkHeaderRoom is the room kept before a batch of frames for its chunk
// size line (16 hex digits and CRLF at most).
const chunkHeaderRoom = 18

// writeWatchConn streams the watch over conn, an HTTP/1.1 connection taken
// over after the response header (chunked, Connection: close) was sent: each
// batch of frames is one chunk written with one call, straight into the TLS
// connection, instead of passing through the response's buffer, its chunk
// writer and the connection's buffer. Most watch events are a single frame
// going to hundreds of watchers; that path is a good part of each one's
// cost. The stream ends as net/http would end it (the last chunk), then the
// connection closes.
//
// The server no longer reads the connection, so a goroutine does: it ends
// the watch when the client goes (and when the connection closes).
func (s *Server) writeWatchConn(r *http.Request, conn net.Conn, cancel context.CancelFunc, wt *watch.Watcher, dl writeDeadliner) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Time{}) // the server's request read deadline, if any
	go func() {
		var b [64]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	err := s.streamWatch(r, wt, chunkHeaderRoom, func(b []byte) error {
		start := putChunkHeader(b[:chunkHeaderRoom], len(b)-chunkHeaderRoom)
		dl.bound(conn.SetWriteDeadline)
		_, err := conn.Write(append(b, "\r\n"...)[start:])
		return err
	})
	if err == nil { // the watch ended: the last chunk
		dl.bound(conn.SetWriteDeadline)
		_, _ = conn.Write([]byte("0\r\n\r\n"))
	}
}

// putChunkHeader writes the chunk size line of an n-byte chunk at the end
// of room and returns where it starts.
func putChunkHeader(room []byte, n int) int {
	i := len(room) - 2
	room[i], room[i+1] = '\r', '\n'
	const hex = "0123456789abcdef"
	for {
		i--
		room[i] = hex[n&0xf]
		n >>= 4
		if n == 0 {
			return i
		}
	}
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

// jsonWatchEncoder encodes watch events as kube-apiserver's JSON stream: one
// {"type":...,"object":...} document per line. It is a comparable value, so
// that frames are shared by every JSON watcher of a type.
type jsonWatchEncoder struct {
	kind, apiVersion string
}

func (e jsonWatchEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	n := len(dst)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ.String()...)
	dst = append(dst, `","object":`...)
	dst, err := registry.AppendObjectJSON(dst, obj.Value, rev)
	if err != nil {
		return dst[:n], err
	}
	return append(dst, "}\n"...), nil
}

func (e jsonWatchEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	dst = append(dst, `{"type":"BOOKMARK","object":{"kind":`...)
	dst = codec.AppendJSONString(dst, e.kind)
	dst = append(dst, `,"apiVersion":`...)
	dst = codec.AppendJSONString(dst, e.apiVersion)
	dst = append(dst, `,"metadata":{"resourceVersion":"`...)
	dst = strconv.AppendInt(dst, rev, 10)
	dst = append(dst, '"')
	if initialEventsEnd {
		dst = append(dst, `,"annotations":{"k8s.io/initial-events-end":"true"}`...)
	}
	return append(dst, "}}}\n"...), nil
}

func (e jsonWatchEncoder) AppendError(dst []byte, err error) []byte {
	se, ok := meta.AsStatusError(err)
	if !ok {
		se = meta.NewInternalError(err)
	}
	status, _ := json.Marshal(se.Status)
	dst = append(dst, `{"type":"ERROR","object":`...)
	dst = append(dst, status...)
	return append(dst, "}\n"...)
}
