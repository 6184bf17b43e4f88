package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// jsonListSink writes a JSON list: head, the items separated by commas,
// then "]}". Each item is written as it is (appendItem nil) or as
// appendItem converts it.
type jsonListSink struct {
	w          io.Writer
	res        *registry.Resource               // the list's, when head is nil
	head       func(h registry.ListHead) []byte // the list up to its first item
	appendItem func(dst, item []byte) ([]byte, error)
	n          int
	buf        []byte
}

func (j *jsonListSink) Begin(h registry.ListHead) error {
	_, err := j.w.Write(j.headJSON(h))
	return err
}

// headJSON is the list that begins with h up to its first item.
func (j *jsonListSink) headJSON(h registry.ListHead) []byte {
	if j.head != nil {
		return j.head(h)
	}
	return listJSONChunks(j.res, nil, headListMeta(h))[0]
}

func (j *jsonListSink) Item(item []byte) error {
	if j.n > 0 {
		if _, err := j.w.Write(comma); err != nil {
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
	_, err := j.w.Write(item)
	return err
}

func (j *jsonListSink) End(registry.ListEnd) error {
	_, err := j.w.Write(listEnd)
	return err
}

var (
	comma   = []byte{','}
	listEnd = []byte("]}")
)

// tableListSink writes a list as a meta.k8s.io Table of the given version:
// the column definitions in its head, a row per item. It fails, before
// anything is read, when the request's includeObject or the table's columns
// do not read.
func tableListSink(r *http.Request, w io.Writer, res *registry.Resource, version string) (*jsonListSink, error) {
	include, err := tableInclude(r)
	if err != nil {
		return nil, err
	}
	b, err := newTableBuilder(res, version, include, time.Now())
	if err != nil {
		return nil, err
	}
	return &jsonListSink{w: w, head: func(h registry.ListHead) []byte {
		head := make([]byte, 0, 2048)
		head = append(head, `{"kind":"Table","apiVersion":"`+codec.MetaGroup+"/"...)
		head = append(head, version...)
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
	}}, nil
}

// metadataJSONListSink writes a list as a PartialObjectMetadataList of the
// given meta.k8s.io version: each item's metadata only.
func metadataJSONListSink(w io.Writer, version string) *jsonListSink {
	return &jsonListSink{w: w, head: func(h registry.ListHead) []byte {
		head := append([]byte(nil), `{"kind":"PartialObjectMetadataList","apiVersion":`...)
		head = appendQuotedJSON(head, codec.MetaGroup+"/"+version)
		head = append(head, `,"metadata":`...)
		lmb, _ := json.Marshal(headListMeta(h))
		head = append(head, lmb...)
		return append(head, `,"items":[`...)
	}, appendItem: func(dst, item []byte) ([]byte, error) {
		md, err := codec.TopLevelField(item, "metadata")
		if err != nil {
			return dst, meta.NewInternalError(err)
		}
		return appendPartialObjectMetadataJSON(dst, version, md), nil
	}}
}
