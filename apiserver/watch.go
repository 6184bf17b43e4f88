package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/apiserver/registry"
)

// defaultBookmarkInterval is how often a watch that asked for bookmarks gets
// one, as kube-apiserver (about once a minute).
const defaultBookmarkInterval = time.Minute

// handleWatch streams watch events as newline-delimited JSON, flushing each.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	q := r.URL.Query()
	if _, _, err := negotiateObject(r, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	lo, err := s.listOptions(q, st)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts := registry.WatchOptions{Labels: lo.Labels, Fields: lo.Fields, ResourceVersion: q.Get("resourceVersion")}
	if info.Name != "" {
		// GET .../NAME?watch=1 watches one object.
		sel, err := meta.ParseFieldSelector("metadata.name=" + info.Name)
		if err != nil {
			s.writeError(w, r, meta.NewBadRequest(err.Error()))
			return
		}
		opts.Fields = sel
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b := isTrue(v)
		if b && q.Get("resourceVersionMatch") != "NotOlderThan" {
			s.writeError(w, r, meta.NewInvalidOptions("ListOptions", meta.ErrorList{
				meta.Forbidden(meta.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan"),
			}))
			return
		}
		opts.SendInitialEvents = &b
	}
	bookmarks := isTrue(q.Get("allowWatchBookmarks"))
	if bookmarks {
		opts.ProgressInterval = defaultBookmarkInterval
	}
	ctx := r.Context()
	if ts := q.Get("timeoutSeconds"); ts != "" {
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, meta.NewBadRequest("invalid timeoutSeconds"))
			return
		}
		if n > 0 {
			var cancel func()
			ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
			defer cancel()
		}
	}
	events, err := st.Watch(ctx, info.Namespace, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	res := st.Resource()
	var buf bytes.Buffer
	for ev := range events {
		buf.Reset()
		switch ev.Type {
		case registry.Bookmark:
			if !bookmarks && !ev.InitialEventsEnd {
				continue
			}
			buf.WriteString(`{"type":"BOOKMARK","object":{"kind":`)
			writeJSONString(&buf, res.Kind)
			buf.WriteString(`,"apiVersion":`)
			writeJSONString(&buf, res.APIVersion())
			buf.WriteString(`,"metadata":{"resourceVersion":"`)
			buf.WriteString(strconv.FormatInt(ev.Revision, 10))
			buf.WriteByte('"')
			if ev.InitialEventsEnd {
				buf.WriteString(`,"annotations":{"k8s.io/initial-events-end":"true"}`)
			}
			buf.WriteString("}}}\n")
		case registry.Error:
			se, ok := meta.AsStatusError(ev.Err)
			if !ok {
				se = meta.NewInternalError(ev.Err)
			}
			status, _ := json.Marshal(se.Status)
			buf.WriteString(`{"type":"ERROR","object":`)
			buf.Write(status)
			buf.WriteString("}\n")
		default:
			buf.WriteString(`{"type":"`)
			buf.WriteString(ev.Type)
			buf.WriteString(`","object":`)
			buf.Write(ev.Object)
			buf.WriteString("}\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}
