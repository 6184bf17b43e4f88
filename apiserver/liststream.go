package apiserver

import (
	"bufio"
	"context"
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
	"github.com/kapi-dev/kapi/watch"
)

// Whole-collection lists (no limit, no continue) are streamed: each item is
// encoded and written as it is read from storage (one page of 500 values at a
// time) or from the watch cache's state, so the server never holds the list,
// its items, or a decoded copy of them. Every representation of a list is
// streamed but YAML and pretty-printed JSON (both rewrite the whole
// document): JSON, protobuf, Table (JSON) and PartialObjectMetadataList
// (JSON and protobuf). Paged lists are built in memory (one page).
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

// streamList serves a whole-collection list by streaming it. It reports
// false, having done nothing, when the request is not one it streams; it may
// have set optsp.FromStorage then (the watch cache declined the list).
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, st *registry.Store, ns string, c codec.Choice, optsp *registry.ListOptions) bool {
	opts := *optsp
	if s.bufferLists.Load() || c.Format == codec.FormatYAML || (c.Format == codec.FormatJSON && wantPretty(r, c)) {
		return false
	}
	res := st.Resource()
	ctx := r.Context()
	paged := opts.Limit > 0 || opts.Continue != ""
	var cl *registry.CachedList
	if paged || (c.As == "" && c.Format == codec.FormatProtobuf && s.pbCache != nil) {
		// From the watch cache, pages are streamed as whole lists are
		// (their objects, continue token and count are known before the
		// first byte); protobuf lists keep each object's encoding.
		if c.As != "" {
			return false
		}
		var ok bool
		var err error
		if cl, ok, err = st.ListCached(ctx, ns, opts); err != nil {
			s.writeError(w, r, err)
			return true
		}
		if !ok {
			// Declined (a lagging cache has been waited for already):
			// the list reads storage, here or in the buffered path.
			opts.FromStorage, optsp.FromStorage = true, true
			if paged {
				return false // one page in memory
			}
		}
	}
	sw := newStreamWriter(w, c.Format.MediaType(), acceptsGzip(r.Header.Values("Accept-Encoding")))
	var err error
	switch {
	case cl != nil && c.Format == codec.FormatJSON:
		err = writeJSONObjects(sw, st, listJSONChunks(res, nil, cachedListMeta(cl))[0], cl.Objects)
	case cl != nil && c.Format == codec.FormatProtobuf:
		var t codec.Transcoder
		msg := res.Protobuf
		encode := func(o *watch.Object) ([]byte, error) {
			item, err := st.AppendItemJSON(nil, o)
			if err != nil {
				return nil, err
			}
			return t.AppendProtobuf(nil, msg, item)
		}
		encoding := encode
		if s.pbCache != nil { // encodings are cached unless ProtobufCacheBytes says none
			encoding = func(o *watch.Object) ([]byte, error) { return cl.Encoding(o, "protobuf", encode) }
		}
		err = writeProtobufObjects(sw, cl.Objects, cachedListMeta(cl), res.APIVersion(), res.ListKind, encoding, cl.SizeMemo("protobuf"))
	case c.As == "" && c.Format == codec.FormatJSON:
		err = streamJSONList(ctx, st, ns, opts, sw, func(rev int64) []byte {
			return listJSONChunks(res, nil, revListMeta(rev))[0]
		}, nil)
	case c.As == "" && c.Format == codec.FormatProtobuf:
		var t codec.Transcoder
		msg := res.Protobuf
		var encoding func(item []byte) ([]byte, error)
		if s.pbCache != nil {
			encoding = func(item []byte) ([]byte, error) { return s.pbCache.Encoding(&t, msg, item) }
		}
		err = streamProtobufList(ctx, st, ns, opts, sw, s.protobufListBuffer, res.APIVersion(), res.ListKind, 1, 2, func(dst, item []byte) ([]byte, error) {
			return s.pbCache.AppendProtobuf(&t, dst, msg, item)
		}, encoding, s.pbCache.Max())
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
		err = streamJSONList(ctx, st, ns, opts, sw, func(rev int64) []byte {
			head := make([]byte, 0, 2048)
			head = append(head, `{"kind":"Table","apiVersion":"`+codec.MetaGroup+"/"...)
			head = append(head, c.Version...)
			head = append(head, `","metadata":`...)
			lmb, _ := json.Marshal(revListMeta(rev))
			head = append(head, lmb...)
			head = append(head, `,"columnDefinitions":`...)
			cols, _ := json.Marshal(b.columns())
			head = append(head, cols...)
			return append(head, `,"rows":[`...)
		}, func(dst, item []byte) ([]byte, error) {
			row, _, err := b.row(item)
			if err != nil {
				return dst, err
			}
			rb, err := json.Marshal(row)
			if err != nil {
				return dst, meta.NewInternalError(err)
			}
			return append(dst, rb...), nil
		})
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatJSON:
		err = streamJSONList(ctx, st, ns, opts, sw, func(rev int64) []byte {
			head := append([]byte(nil), `{"kind":"PartialObjectMetadataList","apiVersion":`...)
			head = appendQuotedJSON(head, codec.MetaGroup+"/"+c.Version)
			head = append(head, `,"metadata":`...)
			lmb, _ := json.Marshal(revListMeta(rev))
			head = append(head, lmb...)
			return append(head, `,"items":[`...)
		}, func(dst, item []byte) ([]byte, error) {
			md, err := codec.TopLevelField(item, "metadata")
			if err != nil {
				return dst, meta.NewInternalError(err)
			}
			return appendPartialObjectMetadataJSON(dst, c.Version, md), nil
		})
	case c.As == codec.AsPartialObjectMetadataList && c.Format == codec.FormatProtobuf:
		metaField, itemsField := protowire.Number(1), protowire.Number(2)
		if c.Version == "v1beta1" {
			metaField, itemsField = 2, 1 // meta/v1beta1 numbers them the other way round
		}
		var t codec.Transcoder
		err = streamProtobufList(ctx, st, ns, opts, sw, s.protobufListBuffer, codec.MetaGroup+"/"+c.Version, codec.AsPartialObjectMetadataList, metaField, itemsField, func(dst, item []byte) ([]byte, error) {
			return t.AppendProtobuf(dst, codec.PartialObjectMetadataMessage, item)
		}, nil, 0)
	default:
		sw.release()
		return false
	}
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

func revListMeta(rev int64) meta.ListMeta {
	return meta.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10)}
}

func cachedListMeta(cl *registry.CachedList) meta.ListMeta {
	lm := revListMeta(cl.ResourceVersion)
	lm.Continue, lm.RemainingItemCount = cl.Continue, cl.RemainingItemCount
	return lm
}

// writeJSONObjects writes a JSON list of objects from the watch cache:
// head, the items separated by commas, then "]}".
func writeJSONObjects(sw *streamWriter, st *registry.Store, head []byte, objs []*watch.Object) error {
	if _, err := sw.Write(head); err != nil {
		return err
	}
	var buf []byte
	for i, o := range objs {
		if i > 0 {
			if _, err := sw.Write(comma); err != nil {
				return err
			}
		}
		var err error
		if buf, err = st.AppendItemJSON(buf[:0], o); err != nil {
			return err
		}
		if _, err := sw.Write(buf); err != nil {
			return err
		}
	}
	_, err := sw.Write(listEnd)
	return err
}

// streamJSONList writes a JSON list: head, the items separated by commas,
// then "]}". Each item is written as it is (appendItem nil) or as
// appendItem converts it.
func streamJSONList(ctx context.Context, st *registry.Store, ns string, opts registry.ListOptions, sw *streamWriter,
	head func(rev int64) []byte, appendItem func(dst, item []byte) ([]byte, error)) error {
	n := 0
	var buf []byte
	begin := func(rev int64) error {
		_, err := sw.Write(head(rev))
		return err
	}
	emit := func(item []byte) error {
		if n > 0 {
			if _, err := sw.Write(comma); err != nil {
				return err
			}
		}
		n++
		if appendItem != nil {
			var err error
			if buf, err = appendItem(buf[:0], item); err != nil {
				return err
			}
			item = buf
		}
		_, err := sw.Write(item)
		return err
	}
	if err := st.ListStream(ctx, ns, opts, begin, emit); err != nil {
		return err
	}
	_, err := sw.Write(listEnd)
	return err
}

var (
	comma   = []byte{','}
	listEnd = []byte("]}")
)

// errListChanged says that the second pass of a protobuf list did not read
// what the first measured (it cannot happen with a consistent snapshot).
var errListChanged = errors.New("the list changed between its two passes")

// streamProtobufList writes a list in the Kubernetes protobuf envelope:
// ListMeta in metaField and each item, as appendItem encodes it, in
// itemsField (see the comment at the top of this file).
//
// With encoding set (items whose encodings the protobuf cache keeps), the
// items past the buffer are not measured and read again in a second pass:
// the list keeps references to their (immutable) encodings, up to refLimit
// bytes of them, and writes them after the buffer in one pass. Past
// refLimit it falls back to measuring and a second pass.
func streamProtobufList(ctx context.Context, st *registry.Store, ns string, opts registry.ListOptions, sw *streamWriter, bufLimit int,
	apiVersion, kind string, metaField, itemsField protowire.Number, appendItem func(dst, item []byte) ([]byte, error),
	encoding func(item []byte) ([]byte, error), refLimit int) error {
	bp := protoBufs.Get()
	body := *bp
	defer func() {
		*bp = body
		protoBufs.Put(bp, 2*bufLimit)
	}()
	var (
		scratch  []byte
		buffered int // items encoded in body
		over     bool
		rest     int      // encoded size of the items after them
		refs     [][]byte // encodings of the items after them, while they fit refLimit
		refBytes int
		reread   bool // the items after them must be read again
	)
	encodeErr := func(err error) error {
		return meta.NewInternalError(fmt.Errorf("encoding a %s item as protobuf: %w", kind, err))
	}
	begin := func(rev int64) error {
		lmb, _ := json.Marshal(revListMeta(rev))
		var err error
		body, err = codec.AppendEmbedded(body, metaField, func(dst []byte) ([]byte, error) {
			return codec.ListMetaMessage.AppendProtobuf(dst, lmb)
		})
		if err != nil {
			return meta.NewInternalError(err)
		}
		return nil
	}
	emit := func(item []byte) error {
		var err error
		if !over && len(body)+len(item)+16 > bufLimit {
			// The item might not fit (its protobuf is about the size of
			// its JSON or smaller): measure from here on.
			over = true
		}
		if !over {
			var start int
			body, start = codec.BeginEmbedded(body, itemsField)
			if body, err = appendItem(body, item); err != nil {
				return encodeErr(err)
			}
			body = codec.EndEmbedded(body, start)
			buffered++
			return nil
		}
		if encoding != nil && !reread {
			enc, err := encoding(item)
			if err != nil {
				return encodeErr(err)
			}
			if refBytes+len(enc) <= refLimit {
				refs = append(refs, enc)
				refBytes += len(enc)
				rest += protowire.SizeTag(itemsField) + protowire.SizeBytes(len(enc))
				return nil
			}
			refs, reread = nil, true // too much to hold: measure the rest, read it again
			rest += protowire.SizeTag(itemsField) + protowire.SizeBytes(len(enc))
			return nil
		}
		reread = true
		if scratch, err = appendItem(scratch[:0], item); err != nil {
			return encodeErr(err)
		}
		rest += protowire.SizeTag(itemsField) + protowire.SizeBytes(len(scratch))
		return nil
	}
	end := func(replay registry.ListReplay) error {
		// Nothing has been written yet: every error so far is a Status.
		hdr := codec.AppendEnvelopeHeader(make([]byte, 0, 64), apiVersion, kind, len(body)+rest)
		sw.announce(len(hdr) + len(body) + rest + len(codec.AppendEnvelopeTrailer(nil)))
		if _, err := sw.Write(hdr); err != nil {
			return err
		}
		if _, err := sw.Write(body); err != nil {
			return err
		}
		if over && !reread {
			prefix := make([]byte, 0, 16)
			for _, enc := range refs {
				prefix = protowire.AppendTag(prefix[:0], itemsField, protowire.BytesType)
				prefix = protowire.AppendVarint(prefix, uint64(len(enc)))
				if _, err := sw.Write(prefix); err != nil {
					return err
				}
				if _, err := sw.Write(enc); err != nil {
					return err
				}
			}
		}
		if over && reread {
			written := 0
			prefix := make([]byte, 0, 16)
			err := replay(buffered, func(item []byte) error {
				var err error
				if scratch, err = appendItem(scratch[:0], item); err != nil {
					return encodeErr(err)
				}
				prefix = protowire.AppendTag(prefix[:0], itemsField, protowire.BytesType)
				prefix = protowire.AppendVarint(prefix, uint64(len(scratch)))
				if written += len(prefix) + len(scratch); written > rest {
					return meta.NewInternalError(errListChanged)
				}
				if _, err := sw.Write(prefix); err != nil {
					return err
				}
				_, err = sw.Write(scratch)
				return err
			})
			if err != nil {
				return err
			}
			if written != rest {
				return meta.NewInternalError(errListChanged)
			}
		}
		_, err := sw.Write(codec.AppendEnvelopeTrailer(hdr[:0]))
		return err
	}
	return st.ListStreamReplay(ctx, ns, opts, begin, emit, end)
}

// writeProtobufObjects writes a protobuf list of objects from the watch
// cache (Store.ListCached). Each object keeps its item's encoding
// (watch.Object.Encoding), so the list's size is known before its first
// byte without transcoding anything twice, and every later list of the same
// versions writes the kept bytes.
//
// sizeMemo, when not nil, remembers the items' total size for the next list
// of the same objects (CachedList.SizeMemo): that list's first byte goes out
// at once, and each item's encoding is fetched as it is written.
func writeProtobufObjects(sw *streamWriter, objs []*watch.Object, lm meta.ListMeta, apiVersion, kind string, encoding func(o *watch.Object) ([]byte, error),
	sizeMemo func(f func() (int, error)) (int, error)) error {
	lmb, _ := json.Marshal(lm)
	head, err := codec.AppendEmbedded(nil, 1, func(dst []byte) ([]byte, error) {
		return codec.ListMetaMessage.AppendProtobuf(dst, lmb)
	})
	if err != nil {
		return meta.NewInternalError(err)
	}
	var encs [][]byte // the encodings, when measuring fetched them
	itemsSize := func() (int, error) {
		encs = make([][]byte, len(objs))
		size := 0
		for i, o := range objs {
			enc, err := encoding(o)
			if err != nil {
				return 0, err
			}
			encs[i] = enc
			size += protowire.SizeTag(2) + protowire.SizeBytes(len(enc))
		}
		return size, nil
	}
	var size int
	if sizeMemo != nil {
		size, err = sizeMemo(itemsSize)
	} else {
		size, err = itemsSize()
	}
	if err != nil {
		return meta.NewInternalError(fmt.Errorf("encoding a %s item as protobuf: %w", kind, err))
	}
	// Nothing has been written yet: every error so far is a Status.
	hdr := codec.AppendEnvelopeHeader(make([]byte, 0, 64), apiVersion, kind, len(head)+size)
	sw.announce(len(hdr) + len(head) + size + len(codec.AppendEnvelopeTrailer(nil)))
	if _, err := sw.Write(hdr); err != nil {
		return err
	}
	if _, err := sw.Write(head); err != nil {
		return err
	}
	prefix := make([]byte, 0, 16)
	written := 0
	for i, o := range objs {
		var enc []byte
		if encs != nil {
			enc = encs[i]
		} else if enc, err = encoding(o); err != nil {
			// Unreachable in practice: the same bytes were encoded when
			// the size was measured. The response is cut (see
			// streamWriter).
			return fmt.Errorf("encoding a %s item as protobuf: %w", kind, err)
		}
		written += protowire.SizeTag(2) + protowire.SizeBytes(len(enc))
		prefix = protowire.AppendTag(prefix[:0], 2, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(len(enc)))
		if _, err := sw.Write(prefix); err != nil {
			return err
		}
		if _, err := sw.Write(enc); err != nil {
			return err
		}
	}
	if written != size {
		// A remembered size that does not match would make a corrupt
		// message: cut the response instead.
		return fmt.Errorf("protobuf %s: items of %d bytes, %d announced", kind, written, size)
	}
	_, err = sw.Write(codec.AppendEnvelopeTrailer(hdr[:0]))
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
