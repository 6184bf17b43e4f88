package apiserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/internal/bufpool"
	"github.com/kapi-dev/kapi/meta"
)

// Lists are streamed through one entry point, registry.Store.List, into a
// sink per representation (jsonListSink, protobufListSink). A
// whole-collection list (no limit, no continue) is encoded and written as it
// is read from storage (one page of 500 values at a time) or from the watch
// cache's state, so the server never holds the list, its items, or a
// decoded copy of them. Every representation of a list is streamed but YAML
// and pretty-printed JSON (both rewrite the whole document): JSON, protobuf,
// Table (JSON) and PartialObjectMetadataList (JSON and protobuf). A page of
// a paged list is streamed in JSON and protobuf (from storage, its values
// are read before its first byte, which carries its continue token); Table
// and PartialObjectMetadata pages are built in memory.
//
// The first gzipThreshold bytes are held back: a list that ends before is
// written with a Content-Length and never compressed, exactly as the
// buffered path writes it, and an error found meanwhile is still a plain
// Status. A longer list commits the status line then: gzip-compressed
// (level 1, through a pooled writer) when the client accepts gzip, chunked
// otherwise. An error after that aborts the connection, so that the client
// sees a broken response, never a complete-looking partial list.
//
// Protobuf needs the length of the list message before its first byte (the
// envelope's raw field is length-prefixed). The list is encoded into a
// buffer of at most Server.protobufListBuffer bytes (4 MiB); a list that
// fits is written from it (one pass). Past the bound, the rest of the items are transcoded
// only to measure them, then written in a second pass over the same snapshot
// (the same storage revision, or the same watch-cache state) that skips the
// items already in the buffer: memory stays bounded at the price of
// transcoding the items past the bound twice. See docs/representations.md.

// streamList serves a list by streaming it: a whole-collection list in every
// representation but YAML and pretty-printed JSON, a page in JSON and
// protobuf. It reports false, having done nothing, when the request is not
// one it streams.
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, st *registry.Store, ns string, c codec.Choice, opts registry.ListOptions) bool {
	if s.bufferLists.Load() || c.Format == codec.FormatYAML || (c.Format == codec.FormatJSON && wantPretty(r, c)) {
		return false
	}
	if (opts.Limit > 0 || opts.Continue != "") && c.As != "" {
		return false // Table and PartialObjectMetadata pages are built in memory
	}
	res := st.Resource()
	sw := newStreamWriter(w, c.Format.MediaType(), acceptsGzip(r.Header.Values("Accept-Encoding")))
	var sink registry.ListSink
	switch {
	case c.As == "" && c.Format == codec.FormatJSON:
		sink = &jsonListSink{sw: sw, res: res}
	case c.As == "" && c.Format == codec.FormatProtobuf:
		ps := newProtobufListSink(sw, s.protobufListBuffer, res.APIVersion(), res.ListKind, 1, 2)
		defer ps.release()
		ps.items = protobufItemEncoding{msg: res.Protobuf, cache: s.pbCache, kind: res.ListKind}
		pe := &ps.items
		if s.pbCache != nil {
			// Encodings are cached unless ProtobufCacheBytes says none:
			// the watch cache's objects keep theirs, storage's items come
			// from the protobuf cache.
			ps.encoding = registry.ItemEncoding{Tag: "protobuf", Append: pe.append, Shared: pe.shared, FramedSize: framedItemSize}
			opts.Encoding = &ps.encoding
			ps.refLimit = s.pbCache.Max()
		} else {
			ps.appendItem = pe.transcode
		}
		opts.Replay = true
		sink = ps
	case c.As == codec.AsTable && c.Format == codec.FormatJSON:
		include, ierr := tableInclude(r)
		if ierr != nil {
			sw.release()
			return false // the buffered path answers the error
		}
		b, berr := newTableBuilder(res, c.Version, include, time.Now())
		if berr != nil {
			sw.release()
			return false
		}
		sink = &jsonListSink{sw: sw, head: func(h registry.ListHead) []byte {
			head := make([]byte, 0, 2048)
			head = append(head, `{"kind":"Table","apiVersion":"`+codec.MetaGroup+"/"...)
			head = append(head, c.Version...)
			head = append(head, `","metadata":`...)
			lmb, _ := json.Marshal(headListMeta(h))
			head = append(head, lmb...)
			head = append(head, `,"columnDefinitions":`...)
			cols, _ := json.Marshal(b.columns())
			head = append(head, cols...)
			return append(head, `,"rows":[`...)
		}, appendItem: func(dst, item []byte) ([]byte, error) {
			row, _, err := b.row(item)
			if err != nil {
				return dst, err
			}
			rb, err := json.Marshal(row)
			if err != nil {
				return dst, meta.NewInternalError(err)
			}
			return append(dst, rb...), nil
		}}
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatJSON:
		sink = &jsonListSink{sw: sw, head: func(h registry.ListHead) []byte {
			head := append([]byte(nil), `{"kind":"PartialObjectMetadataList","apiVersion":`...)
			head = appendQuotedJSON(head, codec.MetaGroup+"/"+c.Version)
			head = append(head, `,"metadata":`...)
			lmb, _ := json.Marshal(headListMeta(h))
			head = append(head, lmb...)
			return append(head, `,"items":[`...)
		}, appendItem: func(dst, item []byte) ([]byte, error) {
			md, err := codec.TopLevelField(item, "metadata")
			if err != nil {
				return dst, meta.NewInternalError(err)
			}
			return appendPartialObjectMetadataJSON(dst, c.Version, md), nil
		}}
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatProtobuf:
		metaField, itemsField := protowire.Number(1), protowire.Number(2)
		if c.Version == "v1beta1" {
			metaField, itemsField = 2, 1 // meta/v1beta1 numbers them the other way round
		}
		var t codec.Transcoder
		ps := newProtobufListSink(sw, s.protobufListBuffer, codec.MetaGroup+"/"+c.Version, codec.AsPartialObjectMetadataList, metaField, itemsField)
		defer ps.release()
		ps.appendItem = func(dst, item []byte) ([]byte, error) {
			return t.AppendProtobuf(dst, codec.PartialObjectMetadataMessage, item)
		}
		opts.Replay = true
		sink = ps
	default:
		sw.release()
		return false
	}
	err := st.List(r.Context(), ns, opts, sink)
	if err == nil {
		err = sw.finish()
	}
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
	return true
}

// protobufItemEncoding encodes a list's items as protobuf, for
// registry.ItemEncoding.
type protobufItemEncoding struct {
	t     codec.Transcoder
	msg   *codec.Message
	cache *codec.ProtobufCache
	kind  string
}

func (e *protobufItemEncoding) err(err error) error {
	return meta.NewInternalError(fmt.Errorf("encoding a %s item as protobuf: %w", e.kind, err))
}

func (e *protobufItemEncoding) transcode(dst, item []byte) ([]byte, error) {
	return e.t.AppendProtobuf(dst, e.msg, item)
}

func (e *protobufItemEncoding) append(dst, item []byte) ([]byte, error) {
	b, err := e.t.AppendProtobuf(dst, e.msg, item)
	if err != nil {
		return b, e.err(err)
	}
	return b, nil
}

func (e *protobufItemEncoding) shared(item []byte) ([]byte, error) {
	b, err := e.cache.Encoding(&e.t, e.msg, item)
	if err != nil {
		return nil, e.err(err)
	}
	return b, nil
}

// framedItemSize is the size of an item of n bytes in field 2 of a list.
func framedItemSize(n int) int { return protowire.SizeTag(2) + protowire.SizeBytes(n) }

func headListMeta(h registry.ListHead) meta.ListMeta {
	return meta.ListMeta{ResourceVersion: strconv.FormatInt(h.ResourceVersion, 10), Continue: h.Continue, RemainingItemCount: h.RemainingItemCount}
}

// jsonListSink writes a JSON list: head, the items separated by commas,
// then "]}". Each item is written as it is (appendItem nil) or as
// appendItem converts it.
type jsonListSink struct {
	sw         *streamWriter
	res        *registry.Resource               // the list's, when head is nil
	head       func(h registry.ListHead) []byte // the list up to its first item
	appendItem func(dst, item []byte) ([]byte, error)
	n          int
	buf        []byte
}

func (j *jsonListSink) Begin(h registry.ListHead) error {
	var head []byte
	if j.head != nil {
		head = j.head(h)
	} else {
		head = listJSONChunks(j.res, nil, headListMeta(h))[0]
	}
	_, err := j.sw.Write(head)
	return err
}

func (j *jsonListSink) Item(item []byte) error {
	if j.n > 0 {
		if _, err := j.sw.Write(comma); err != nil {
			return err
		}
	}
	j.n++
	if j.appendItem != nil {
		var err error
		if j.buf, err = j.appendItem(j.buf[:0], item); err != nil {
			return err
		}
		item = j.buf
	}
	_, err := j.sw.Write(item)
	return err
}

func (j *jsonListSink) End(registry.ListEnd) error {
	_, err := j.sw.Write(listEnd)
	return err
}

var (
	comma   = []byte{','}
	listEnd = []byte("]}")
)

// errListChanged says that the second pass of a protobuf list did not read
// what the first measured (it cannot happen with a consistent snapshot).
var errListChanged = errors.New("the list changed between its two passes")

// protobufListSink writes a list in the Kubernetes protobuf envelope:
// ListMeta in metaField and each item in itemsField (see the comment at the
// top of this file). Items come as JSON that appendItem encodes, or, with
// appendItem nil, already encoded (ListOptions.Encoding) by a cache shared
// between lists, which makes them safe to keep.
//
// When the list knows the items' size before the first
// (ListHead.ItemsSize: a list the watch cache serves), the envelope goes
// out at once and each item as it comes. Otherwise the items are encoded
// into a buffer of at most bufLimit bytes; past it, encoded items are kept
// by reference, up to refLimit bytes of them, and written after the buffer
// in one pass; beyond that (or for JSON items) they are only measured and
// read again in a second pass (ListEnd.Replay), skipping the buffered ones.
type protobufListSink struct {
	sw                    *streamWriter
	bufLimit, refLimit    int
	apiVersion, kind      string
	metaField, itemsField protowire.Number
	appendItem            func(dst, item []byte) ([]byte, error)
	items                 protobufItemEncoding  // for a list of the resource's own messages
	encoding              registry.ItemEncoding // the list's, when it has one

	bp       *[]byte
	body     []byte
	hdr      []byte // the envelope's header, written at Begin when the size is known
	scratch  []byte
	prefix   [16]byte // an item's field prefix
	size     int      // the items' size when known at Begin, else -1
	written  int      // bytes of items written (size known) or replayed
	buffered int      // items encoded in body
	over     bool
	rest     int      // encoded size of the items after them
	refs     [][]byte // encodings of the items after them, while they fit refLimit
	refBytes int
	reread   bool // the items after them must be read again
}

func newProtobufListSink(sw *streamWriter, bufLimit int, apiVersion, kind string, metaField, itemsField protowire.Number) *protobufListSink {
	return &protobufListSink{sw: sw, bufLimit: bufLimit, apiVersion: apiVersion, kind: kind, metaField: metaField, itemsField: itemsField,
		size: -1}
}

// release returns the pooled buffer, if the list took one.
func (p *protobufListSink) release() {
	if p.bp != nil {
		*p.bp = p.body
		protoBufs.Put(p.bp, 2*p.bufLimit)
		p.bp = nil
	}
}

func (p *protobufListSink) encodeErr(err error) error {
	return meta.NewInternalError(fmt.Errorf("encoding a %s item as protobuf: %w", p.kind, err))
}

// framed returns the field prefix of an encoded item of n bytes (in p.prefix).
func (p *protobufListSink) framed(n int) []byte {
	b := protowire.AppendTag(p.prefix[:0], p.itemsField, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func (p *protobufListSink) Begin(h registry.ListHead) error {
	lmb, _ := json.Marshal(headListMeta(h))
	if h.ItemsSize < 0 {
		// The items go to the pooled buffer first.
		p.bp = protoBufs.Get()
		p.body = *p.bp
	} else {
		p.body = make([]byte, 0, len(lmb)+32) // ListMeta alone
	}
	var err error
	p.body, err = codec.AppendEmbedded(p.body, p.metaField, func(dst []byte) ([]byte, error) {
		return codec.ListMetaMessage.AppendProtobuf(dst, lmb)
	})
	if err != nil {
		return meta.NewInternalError(err)
	}
	if h.ItemsSize < 0 {
		return nil
	}
	// Nothing has been written yet: every error so far is a Status.
	p.size = h.ItemsSize
	hdr := codec.AppendEnvelopeHeader(make([]byte, 0, 64), p.apiVersion, p.kind, len(p.body)+p.size)
	p.sw.announce(len(hdr) + len(p.body) + p.size + len(codec.AppendEnvelopeTrailer(nil)))
	if _, err := p.sw.Write(hdr); err != nil {
		return err
	}
	p.hdr = hdr
	_, err = p.sw.Write(p.body)
	return err
}

func (p *protobufListSink) Item(item []byte) error {
	if p.size >= 0 {
		// The size is known: write the item.
		prefix := protowire.AppendVarint(protowire.AppendTag(p.prefix[:0], p.itemsField, protowire.BytesType), uint64(len(item)))
		p.written += len(prefix) + len(item)
		if _, err := p.sw.Write(prefix); err != nil {
			return err
		}
		_, err := p.sw.Write(item)
		return err
	}
	var err error
	if !p.over && len(p.body)+len(item)+16 > p.bufLimit {
		// The item might not fit (its protobuf is about the size of its
		// JSON or smaller): measure from here on.
		p.over = true
	}
	if !p.over {
		if p.appendItem == nil {
			p.body = append(append(p.body, p.framed(len(item))...), item...)
		} else {
			var start int
			p.body, start = codec.BeginEmbedded(p.body, p.itemsField)
			if p.body, err = p.appendItem(p.body, item); err != nil {
				return p.encodeErr(err)
			}
			p.body = codec.EndEmbedded(p.body, start)
		}
		p.buffered++
		return nil
	}
	if p.appendItem == nil {
		p.rest += protowire.SizeTag(p.itemsField) + protowire.SizeBytes(len(item))
		if !p.reread {
			if p.refBytes+len(item) <= p.refLimit {
				p.refs = append(p.refs, item)
				p.refBytes += len(item)
				return nil
			}
			p.refs, p.reread = nil, true // too much to hold: measure the rest, read it again
		}
		return nil
	}
	p.reread = true
	if p.scratch, err = p.appendItem(p.scratch[:0], item); err != nil {
		return p.encodeErr(err)
	}
	p.rest += protowire.SizeTag(p.itemsField) + protowire.SizeBytes(len(p.scratch))
	return nil
}

func (p *protobufListSink) End(e registry.ListEnd) error {
	if p.size >= 0 {
		if p.written != p.size {
			// A remembered size that does not match would make a
			// corrupt message: cut the response instead.
			return fmt.Errorf("protobuf %s: items of %d bytes, %d announced", p.kind, p.written, p.size)
		}
		_, err := p.sw.Write(codec.AppendEnvelopeTrailer(p.hdr[:0]))
		return err
	}
	// Nothing has been written yet: every error so far is a Status.
	hdr := codec.AppendEnvelopeHeader(make([]byte, 0, 64), p.apiVersion, p.kind, len(p.body)+p.rest)
	p.sw.announce(len(hdr) + len(p.body) + p.rest + len(codec.AppendEnvelopeTrailer(nil)))
	if _, err := p.sw.Write(hdr); err != nil {
		return err
	}
	if _, err := p.sw.Write(p.body); err != nil {
		return err
	}
	if p.over && !p.reread {
		for _, enc := range p.refs {
			if _, err := p.sw.Write(p.framed(len(enc))); err != nil {
				return err
			}
			if _, err := p.sw.Write(enc); err != nil {
				return err
			}
		}
	}
	if p.over && p.reread {
		if e.Replay == nil {
			return meta.NewInternalError(errors.New("a protobuf list past its buffer needs ListOptions.Replay"))
		}
		err := e.Replay(p.buffered, func(item []byte) error {
			if p.appendItem != nil {
				var err error
				if p.scratch, err = p.appendItem(p.scratch[:0], item); err != nil {
					return p.encodeErr(err)
				}
				item = p.scratch
			}
			prefix := p.framed(len(item))
			if p.written += len(prefix) + len(item); p.written > p.rest {
				return meta.NewInternalError(errListChanged)
			}
			if _, err := p.sw.Write(prefix); err != nil {
				return err
			}
			_, err := p.sw.Write(item)
			return err
		})
		if err != nil {
			return err
		}
		if p.written != p.rest {
			return meta.NewInternalError(errListChanged)
		}
	}
	_, err := p.sw.Write(codec.AppendEnvelopeTrailer(hdr[:0]))
	return err
}

var protoBufs = bufpool.New(64 << 10)

// streamWriter writes a response body of unknown length: it holds the first
// gzipThreshold bytes back, then commits the status line and writes through
// a pooled gzip or bufio writer (see the comment at the top of this file).
type streamWriter struct {
	w         http.ResponseWriter
	mediaType string
	gzip      bool // the client accepts gzip

	head    *[]byte // the body until the response starts
	length  int     // the body's length when known before its first byte, else -1
	started bool
	out     io.Writer
	bw      *bufio.Writer
	zw      *gzip.Writer
	err     error // the first write error: the client is gone
}

var (
	headBufs  = bufpool.New(16 << 10) // grows to below gzipThreshold
	bufioPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
	gzipPool  = sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return zw
	}}
)

func newStreamWriter(w http.ResponseWriter, mediaType string, gzipOK bool) *streamWriter {
	return &streamWriter{w: w, mediaType: mediaType, gzip: gzipOK, head: headBufs.Get(), length: -1}
}

// announce tells the writer the body's length before its first byte (a
// protobuf list knows it). An uncompressed body then goes out with a
// Content-Length instead of chunked: no chunk framing, and 32 KiB writes
// that become two full TLS records each instead of three (the framing
// split them in net/http's 4 KiB buffer).
func (sw *streamWriter) announce(n int) { sw.length = n }

func (sw *streamWriter) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	if !sw.started {
		if len(*sw.head)+len(p) < gzipThreshold {
			*sw.head = append(*sw.head, p...)
			return len(p), nil
		}
		sw.start()
		if _, err := sw.out.Write(*sw.head); err != nil {
			sw.err = err
			return 0, err
		}
		sw.releaseHead()
	}
	if _, err := sw.out.Write(p); err != nil {
		sw.err = err
		return 0, err
	}
	return len(p), nil
}

// start commits the status line of a body of gzipThreshold bytes or more.
func (sw *streamWriter) start() {
	sw.started = true
	h := sw.w.Header()
	h.Set("Content-Type", sw.mediaType)
	h.Set("X-Content-Type-Options", "nosniff")
	if sw.gzip {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		h.Del("Content-Length")
		sw.w.WriteHeader(http.StatusOK)
		sw.zw = gzipPool.Get().(*gzip.Writer)
		sw.zw.Reset(sw.w)
		sw.out = sw.zw
		return
	}
	if sw.length >= 0 {
		h.Set("Content-Length", strconv.Itoa(sw.length))
	}
	sw.w.WriteHeader(http.StatusOK)
	sw.bw = bufioPool.Get().(*bufio.Writer)
	sw.bw.Reset(sw.w)
	sw.out = sw.bw
}

// finish completes the body: a short one is written whole with its
// Content-Length, a long one is flushed.
func (sw *streamWriter) finish() error {
	if !sw.started {
		sw.started = true
		h := sw.w.Header()
		h.Set("Content-Type", sw.mediaType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", strconv.Itoa(len(*sw.head)))
		sw.w.WriteHeader(http.StatusOK)
		_, sw.err = sw.w.Write(*sw.head)
		sw.release()
		return sw.err
	}
	if sw.zw != nil {
		sw.err = sw.zw.Close()
	} else {
		sw.err = sw.bw.Flush()
	}
	if sw.err == nil {
		sw.release()
	}
	return sw.err
}

func (sw *streamWriter) releaseHead() {
	if sw.head != nil {
		headBufs.Put(sw.head, 2*gzipThreshold) // always kept: it stays below gzipThreshold
		sw.head = nil
	}
}

// release returns the pooled buffers (not after a failed write: a writer in
// an unknown state is dropped).
func (sw *streamWriter) release() {
	sw.releaseHead()
	if sw.zw != nil {
		sw.zw.Reset(io.Discard)
		gzipPool.Put(sw.zw)
		sw.zw = nil
	}
	if sw.bw != nil {
		sw.bw.Reset(nil)
		bufioPool.Put(sw.bw)
		sw.bw = nil
	}
}
