package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/internal/bufpool"
	"github.com/kapi-dev/kapi/meta"
)

// Protobuf needs the length of the list message before its first byte (the
// envelope's raw field is length-prefixed). The list is encoded into a
// buffer of at most Server.protobufListBuffer bytes (4 MiB); a list that
// fits is written from it (one pass). Past the bound, the rest of the items
// are transcoded only to measure them, then written in a second pass over
// the same snapshot (the same storage revision, or the same watch-cache
// state) that skips the items already in the buffer: memory stays bounded
// at the price of transcoding the items past the bound twice. See
// docs/representations.md.

// objectProtobufListSink writes a list of res's own protobuf messages.
// Encodings are cached unless ProtobufCacheBytes says none: the watch
// cache's objects keep theirs, storage's items come from the protobuf cache
// (opts.Encoding).
func (s *Server) objectProtobufListSink(sw *streamWriter, res *registry.Resource, opts *registry.ListOptions) *protobufListSink {
	ps := newProtobufListSink(sw, s.protobufListBuffer, res.APIVersion(), res.ListKind, 1, 2)
	ps.items = protobufItemEncoding{msg: res.Protobuf, cache: s.pbCache, kind: res.ListKind}
	pe := &ps.items
	if s.pbCache != nil {
		ps.encoding = registry.ItemEncoding{Tag: "protobuf", Append: pe.append, Shared: pe.shared, FramedSize: framedItemSize}
		opts.Encoding = &ps.encoding
		ps.refLimit = s.pbCache.Max()
	} else {
		ps.appendItem = pe.transcode
	}
	return ps
}

// metadataProtobufListSink writes a list as a protobuf
// PartialObjectMetadataList of the given meta.k8s.io version.
func (s *Server) metadataProtobufListSink(sw *streamWriter, version string) *protobufListSink {
	metaField, itemsField := protowire.Number(1), protowire.Number(2)
	if version == "v1beta1" {
		metaField, itemsField = 2, 1 // meta/v1beta1 numbers them the other way round
	}
	var t codec.Transcoder
	ps := newProtobufListSink(sw, s.protobufListBuffer, codec.MetaGroup+"/"+version, codec.AsPartialObjectMetadataList, metaField, itemsField)
	ps.appendItem = func(dst, item []byte) ([]byte, error) {
		return t.AppendProtobuf(dst, codec.PartialObjectMetadataMessage, item)
	}
	return ps
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
