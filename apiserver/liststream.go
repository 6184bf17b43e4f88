package apiserver

import (
	"net/http"
	"strconv"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// Lists are streamed through one entry point, registry.Store.List, into a
// sink per representation (jsonListSink in listjson.go, protobufListSink in
// listprotobuf.go), through a streamWriter (streamwriter.go). A
// whole-collection list (no limit, no continue) is encoded and written as it
// is read from storage (one page of 500 values at a time) or from the watch
// cache's state, so the server never holds the list, its items, or a
// decoded copy of them. Every representation of a list is streamed but YAML
// and pretty-printed JSON (both rewrite the whole document): JSON, protobuf,
// Table (JSON) and PartialObjectMetadataList (JSON and protobuf). A page of
// a paged list is streamed in JSON and protobuf (from storage, its values
// are read before its first byte, which carries its continue token); Table
// and PartialObjectMetadata pages are built in memory. See
// docs/representations.md.

// streamList serves a list by streaming it: a whole-collection list in every
// representation but YAML and pretty-printed JSON, a page in JSON and
// protobuf. It reports false, having done nothing, when the request is not
// one it streams.
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, st *registry.Store, ns string, c codec.Choice, opts registry.ListOptions) bool {
	if !s.streamsList(r, c, &opts) {
		return false
	}
	sw := newStreamWriter(w, c.Format.MediaType(), acceptsGzip(r.Header.Values("Accept-Encoding")))
	sink, ok := s.listSink(r, sw, st.Resource(), c, &opts)
	if !ok {
		sw.release()
		return false
	}
	if ps, isProtobuf := sink.(*protobufListSink); isProtobuf {
		defer ps.release()
	}
	err := st.List(r.Context(), ns, opts, sink)
	if err == nil {
		err = sw.finish()
	}
	s.endStreamedList(w, r, sw, err)
	return true
}

// streamsList says whether streamList streams a list in representation c.
func (s *Server) streamsList(r *http.Request, c codec.Choice, opts *registry.ListOptions) bool {
	if s.bufferLists.Load() || c.Format == codec.FormatYAML || (c.Format == codec.FormatJSON && wantPretty(r, c)) {
		return false
	}
	if (opts.Limit > 0 || opts.Continue != "") && c.As != "" {
		return false // Table and PartialObjectMetadata pages are built in memory
	}
	return true
}

// listSink returns the sink that writes a list of res to sw in
// representation c, and sets what it needs in opts (the shared encodings,
// the replay of a second pass). It reports false for a representation it
// does not stream, or a Table it cannot build: the buffered path answers
// that request.
func (s *Server) listSink(r *http.Request, sw *streamWriter, res *registry.Resource, c codec.Choice, opts *registry.ListOptions) (registry.ListSink, bool) {
	switch {
	case c.As == "" && c.Format == codec.FormatJSON:
		return &jsonListSink{sw: sw, res: res}, true
	case c.As == "" && c.Format == codec.FormatProtobuf:
		opts.Replay = true
		return s.objectProtobufListSink(sw, res, opts), true
	case c.As == codec.AsTable && c.Format == codec.FormatJSON:
		return tableListSink(r, sw, res, c.Version)
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatJSON:
		return metadataJSONListSink(sw, c.Version), true
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatProtobuf:
		opts.Replay = true
		return s.metadataProtobufListSink(sw, c.Version), true
	}
	return nil, false
}

// endStreamedList answers a streamed list that ended with err (nil: the
// list is complete and written).
func (s *Server) endStreamedList(w http.ResponseWriter, r *http.Request, sw *streamWriter, err error) {
	switch {
	case err == nil:
	case sw.err != nil:
		// A failed write means the client is gone: nothing more to do.
	case !sw.started:
		sw.release()
		s.writeError(w, r, err)
	default:
		// The list failed after the status line went out: cut the body
		// short so that the client sees a broken response, never a
		// complete-looking partial list.
		s.log.Error("list failed while streaming", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// headListMeta is the ListMeta of a list that begins with h.
func headListMeta(h registry.ListHead) meta.ListMeta {
	return meta.ListMeta{ResourceVersion: strconv.FormatInt(h.ResourceVersion, 10), Continue: h.Continue, RemainingItemCount: h.RemainingItemCount}
}
