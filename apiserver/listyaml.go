package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// yamlListSink writes a list as YAML item by item, byte for byte as
// codec.JSONToYAML converts the whole JSON list that list writes (objects,
// a Table or a PartialObjectMetadataList). The converted keys are sorted:
// those before the list's array (key) are written at Begin, those after it
// at End. Each item is converted inside a one-item list, so that the
// encoder sees it at the depth and column it has in the whole document
// (long strings wrap at the same places).
type yamlListSink struct {
	w     io.Writer
	list  *jsonListSink // its head and appendItem; its writer is unused
	key   string        // the array's key: "items", or "rows" for a Table
	open  []byte        // the array's first line: key + ":\n"
	empty []byte        // the array's line when it has no item: key + ": []\n"
	tail  []byte        // the YAML of the keys after the array
	n     int
	doc   []byte
}

func newYAMLListSink(w io.Writer, list *jsonListSink, key string) *yamlListSink {
	return &yamlListSink{w: w, list: list, key: key, open: []byte(key + ":\n"), empty: []byte(key + ": []\n")}
}

var errUnexpectedYAML = errors.New("encoding YAML: a list did not convert in the expected layout")

// Begin converts the list's head with an empty array and splits the YAML
// at the array's line.
func (y *yamlListSink) Begin(h registry.ListHead) error {
	head := y.list.headJSON(h)
	if !bytes.HasSuffix(head, []byte(`"`+y.key+`":[`)) {
		return meta.NewInternalError(errUnexpectedYAML)
	}
	out, err := y.convert(append(head, "]}"...))
	if err != nil {
		return err
	}
	i := topLevelLine(out, y.empty)
	if i < 0 {
		return meta.NewInternalError(errUnexpectedYAML)
	}
	y.tail = out[i+len(y.empty):]
	_, err = y.w.Write(out[:i])
	return err
}

func (y *yamlListSink) Item(item []byte) error {
	y.doc = append(append(append(y.doc[:0], `{"`...), y.key...), `":[`...)
	if y.list.appendItem != nil {
		var err error
		if y.doc, err = y.list.appendItem(y.doc, item); err != nil {
			return err
		}
	} else {
		y.doc = append(y.doc, item...)
	}
	out, err := y.convert(append(y.doc, "]}"...))
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(out, y.open) {
		return meta.NewInternalError(errUnexpectedYAML)
	}
	if y.n > 0 {
		out = out[len(y.open):] // the first item's carries the array's first line
	}
	y.n++
	_, err = y.w.Write(out)
	return err
}

func (y *yamlListSink) End(registry.ListEnd) error {
	if y.n == 0 {
		if _, err := y.w.Write(y.empty); err != nil {
			return err
		}
	}
	_, err := y.w.Write(y.tail)
	return err
}

func (y *yamlListSink) convert(doc []byte) ([]byte, error) {
	out, err := codec.JSONToYAML(doc)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("encoding YAML: %w", err))
	}
	return out, nil
}

// topLevelLine returns where line begins a line of out, or -1. In the YAML
// of a mapping only its keys begin at column 0 (values and continued
// strings are indented), so a key's line is found once.
func topLevelLine(out, line []byte) int {
	for i := 0; ; {
		if bytes.HasPrefix(out[i:], line) {
			return i
		}
		nl := bytes.IndexByte(out[i:], '\n')
		if nl < 0 {
			return -1
		}
		i += nl + 1
	}
}
