package apiserver

import (
	"bufio"
	"net/http"
	"strconv"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

// streamList serves a whole-collection list as plain JSON by writing each
// item as it is read from storage, so the server never holds more than one
// storage page of the list. It reports false, having written nothing, when
// the request is not one it streams: paged lists (limit, continue: their
// metadata is known only at the end), conversions (Table, metadata), other
// formats, pretty output and gzip (the size decides gzip).
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, st *registry.Store, ns string, c codec.Choice, opts registry.ListOptions) bool {
	if c.Format != codec.FormatJSON || c.As != "" || opts.Limit > 0 || opts.Continue != "" ||
		wantPretty(r, c) || acceptsGzip(r.Header.Values("Accept-Encoding")) {
		return false
	}
	res := st.Resource()
	bw := bufio.NewWriterSize(w, 32<<10)
	started, n := false, 0
	var writeErr error
	begin := func(rev int64) error {
		head := listJSONChunks(res, nil, meta.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10)})[0]
		h := w.Header()
		h.Set("Content-Type", c.Format.MediaType())
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		started = true
		_, writeErr = bw.Write(head)
		return writeErr
	}
	emit := func(item []byte) error {
		if n > 0 {
			if writeErr = bw.WriteByte(','); writeErr != nil {
				return writeErr
			}
		}
		n++
		_, writeErr = bw.Write(item)
		return writeErr
	}
	err := st.ListStream(r.Context(), ns, opts, begin, emit)
	switch {
	case err == nil:
		if _, err := bw.WriteString("]}"); err == nil {
			_ = bw.Flush()
		}
	case !started:
		s.writeError(w, r, err)
	case writeErr == nil:
		// The storage read failed after the status line went out: cut the
		// body short so that the client sees a broken response, never a
		// complete-looking partial list.
		s.log.Error("list failed while streaming", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
	// A failed write means the client is gone: nothing more to do.
	return true
}
