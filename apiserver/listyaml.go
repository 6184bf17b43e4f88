package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// yamlListSink writes a list as YAML item by item, byte for byte as
// codec.JSONToYAML converts the whole list: the list's keys sorted
// (apiVersion, items, kind, metadata), and each item converted inside a
// one-item list, so that the encoder sees it at the depth and column it
// has in the whole document (long strings wrap at the same places).
type yamlListSink struct {
	w    io.Writer
	res  *registry.Resource
	head registry.ListHead
	n    int
	doc  []byte
}

var (
	yamlItemsKey      = []byte("items:\n")
	errUnexpectedYAML = errors.New("encoding YAML: an item did not convert as a one-item list")
)

func (y *yamlListSink) Begin(h registry.ListHead) error {
	y.head = h
	return y.convert(appendQuotedJSON([]byte(`{"apiVersion":`), y.res.APIVersion()), '}', nil)
}

func (y *yamlListSink) Item(item []byte) error {
	if y.n == 0 {
		if _, err := y.w.Write(yamlItemsKey); err != nil {
			return err
		}
	}
	y.n++
	y.doc = append(append(y.doc[:0], `{"items":[`...), item...)
	return y.convert(y.doc, ']', yamlItemsKey)
}

func (y *yamlListSink) End(registry.ListEnd) error {
	if y.n == 0 {
		if _, err := y.w.Write([]byte("items: []\n")); err != nil {
			return err
		}
	}
	doc := appendQuotedJSON([]byte(`{"kind":`), y.res.ListKind)
	lm, err := json.Marshal(headListMeta(y.head))
	if err != nil {
		return meta.NewInternalError(err)
	}
	doc = append(append(doc, `,"metadata":`...), lm...)
	return y.convert(doc, '}', nil)
}

// convert closes the JSON document doc with close (and '}' after ']'),
// converts it to YAML and writes it without its first line when that is
// skip.
func (y *yamlListSink) convert(doc []byte, close byte, skip []byte) error {
	doc = append(doc, close)
	if close == ']' {
		doc = append(doc, '}')
	}
	out, err := codec.JSONToYAML(doc)
	if err != nil {
		return meta.NewInternalError(err)
	}
	if skip != nil {
		if !bytes.HasPrefix(out, skip) {
			return meta.NewInternalError(errUnexpectedYAML)
		}
		out = out[len(skip):]
	}
	_, err = y.w.Write(out)
	return err
}
