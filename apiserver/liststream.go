package apiserver

import (
	"io"
	"net/http"
	"strconv"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// Lists are streamed through one entry point, registry.Store.List, into a
// sink per representation (jsonListSink in listjson.go, protobufListSink in
// listprotobuf.go, yamlListSink in listyaml.go), through a streamWriter
// (streamwriter.go). A whole-collection list (no limit, no continue) is
// encoded and written as it is read from storage (one page of 500 values at
// a time) or from the watch cache's state, so the server never holds the
// list, its items, or a decoded copy of them. Every representation of a
// list is streamed: JSON (pretty-printed too, through an indentWriter),
// protobuf, YAML, Table (JSON and YAML) and PartialObjectMetadataList (JSON,
// YAML and protobuf); YAML is the JSON list of its representation,
// converted item by item. A page of a paged list is streamed in JSON, YAML
// and protobuf (from storage, its values are read before its first byte,
// which carries its continue token); Table and PartialObjectMetadata pages
// are built in memory. See docs/representations.md.

// streamList serves a list by streaming it (streamsList says which). It
// reports false, having done nothing, when the request is not one it
// streams.
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, st *registry.Store, ns string, c codec.Choice, opts registry.ListOptions) bool {
	if !s.streamsList(r, c, &opts) {
		return false
	}
	sw := newStreamWriter(w, c.Format.MediaType(), acceptsGzip(r.Header.Values("Accept-Encoding")))
	var out io.Writer = sw
	pretty := c.Format == codec.FormatJSON && wantPretty(r, c)
	if pretty {
		out = &indentWriter{w: sw}
	}
	sink, err := s.listSink(r, out, st.Resource(), c, &opts)
	if sink == nil || err != nil {
		sw.release()
		if err != nil {
			s.writeError(w, r, err)
			return true
		}
		return false
	}
	if ps, isProtobuf := sink.(*protobufListSink); isProtobuf {
		defer ps.release()
	}
	err = st.List(r.Context(), ns, opts, sink)
	if err == nil && pretty {
		_, err = sw.Write(newline) // as the buffered path ends an indented document
	}
	if err == nil {
		err = sw.finish()
	}
	s.endStreamedList(w, r, sw, err)
	return true
}

var newline = []byte{'\n'}

// streamsList says whether streamList streams a list in representation c.
func (s *Server) streamsList(r *http.Request, c codec.Choice, opts *registry.ListOptions) bool {
	if s.bufferLists.Load() {
		return false
	}
	if (opts.Limit > 0 || opts.Continue != "") && c.As != "" {
		return false // Table and PartialObjectMetadata pages are built in memory
	}
	return true
}

// listSink returns the sink that writes a list of res to out in
// representation c, and sets what it needs in opts (the shared encodings,
// the replay of a second pass). YAML is the JSON list of the same
// representation, converted as it goes. It fails, before anything is read,
// for a list that cannot be answered in c (PartialObjectMetadata, singular;
// a Table option that does not read); it returns no sink and no error for a
// representation it does not stream, which the buffered path answers.
func (s *Server) listSink(r *http.Request, out io.Writer, res *registry.Resource, c codec.Choice, opts *registry.ListOptions) (registry.ListSink, error) {
	if c.As == codec.AsPartialObjectMetadata {
		return nil, metadataOfList(res)
	}
	if sw, ok := out.(*streamWriter); ok && c.Format == codec.FormatProtobuf { // protobuf is never indented
		switch c.As {
		case "":
			opts.Replay = true
			return s.objectProtobufListSink(sw, res, opts), nil
		case codec.AsPartialObjectMetadataList:
			opts.Replay = true
			return s.metadataProtobufListSink(sw, c.Version), nil
		}
		return nil, nil
	}
	if c.Format != codec.FormatJSON && c.Format != codec.FormatYAML {
		return nil, nil
	}
	var (
		j   *jsonListSink
		key = "items"
	)
	switch c.As {
	case "":
		j = &jsonListSink{w: out, res: res}
	case codec.AsTable:
		var err error
		if j, err = tableListSink(r, out, res, c.Version); err != nil {
			return nil, err
		}
		key = "rows"
	case codec.AsPartialObjectMetadataList:
		j = metadataJSONListSink(out, c.Version)
	default:
		return nil, nil
	}
	if c.Format == codec.FormatYAML {
		return newYAMLListSink(out, j, key), nil
	}
	return j, nil
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
