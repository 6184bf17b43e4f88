package registry

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/internal/bufpool"
)

// Stored values are the object's JSON without metadata.resourceVersion (the
// storage revision is the resourceVersion, known only after the write), laid
// out so that reads never decode it:
//
//	'k' 1 uvarint(M) JSON
//
// where JSON is `{"apiVersion":...,"kind":...,"metadata":{...},...}` — the type
// fields first, then metadata, then the remaining fields in key order — and M
// is the offset of `"metadata"` in JSON. A read splices
// `"resourceVersion":"N",` right after `"metadata":{` (metadata is never empty:
// every stored object has a name and a uid), and a list item of a built-in type
// drops everything before M.
const (
	storedMagic   = 'k'
	storedVersion = 1
	metaKey       = `"metadata":{`
)

// encodeStored encodes obj for storage into a new buffer (appendStored).
func encodeStored(obj Object) ([]byte, error) {
	return appendStored(make([]byte, 0, 4096), obj)
}

// storedBuffers holds the buffers writes encode into. A storage backend does
// not retain the value a write gives it (storage.Store), so a write's encoding
// is free again once the write has returned and its response has been made
// from it: a create or an update then allocates no buffer for it. Buffers
// above maxPooledStored are not kept: a rare large object does not pin its
// buffer.
var storedBuffers = bufpool.New(4096)

const maxPooledStored = 64 << 10

// encodeStoredInto is encodeStored into *buf (from storedBuffers), which
// keeps the buffer, grown if need be, for the next use; the result is valid
// until the next encodeStoredInto or until buf goes back to the pool.
func encodeStoredInto(buf *[]byte, obj Object) ([]byte, error) {
	enc, err := appendStored((*buf)[:0], obj)
	if err == nil {
		*buf = enc
	}
	return enc, err
}

// appendStored appends the encoding of obj for storage to out, in one pass:
// the type fields come first, so the metadata offset the header records is
// known before the rest is written. obj must have a non-empty metadata
// object; its resourceVersion is not stored. obj is not modified.
func appendStored(out []byte, obj Object) ([]byte, error) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok || len(md) == 0 {
		return nil, errors.New("registry: object has no metadata")
	}
	var head [128]byte
	typeMeta := append(head[:0], '{')
	for _, k := range [...]string{"apiVersion", "kind"} {
		if v, ok := obj[k]; ok {
			var err error
			typeMeta = append(codec.AppendJSONString(typeMeta, k), ':')
			if typeMeta, err = codec.AppendJSON(typeMeta, v); err != nil {
				return nil, fmt.Errorf("registry: encoding field %s: %w", k, err)
			}
			typeMeta = append(typeMeta, ',')
		}
	}
	out = append(out, storedMagic, storedVersion)
	out = binary.AppendUvarint(out, uint64(len(typeMeta)))
	out = append(out, typeMeta...)
	out = append(out, metaKey...)
	out, n, err := codec.AppendJSONFields(out, md, func(k string) bool { return k == "resourceVersion" })
	if err != nil {
		return nil, fmt.Errorf("registry: encoding field metadata: %w", err)
	}
	if n == 0 {
		return nil, errors.New("registry: object metadata is empty")
	}
	out = append(out, '}')
	out, n, err = codec.AppendJSONFields(append(out, ','), obj, func(k string) bool { return k == "apiVersion" || k == "kind" || k == "metadata" })
	if err != nil {
		return nil, fmt.Errorf("registry: encoding %w", err)
	}
	if n == 0 {
		out = out[:len(out)-1] // the comma before no more fields
	}
	return append(out, '}'), nil
}

// unconvertedMagic starts the value a converting storage hands up in place
// of a stored value it could not convert (see convertingStorage.out): the
// conversion's error message follows. Nothing writes it to storage; every
// read of it (parseStored) fails with that error.
const unconvertedMagic = 'x'

// unconvertedError is the error of a value that could not be converted.
type unconvertedError string

func (e unconvertedError) Error() string { return string(e) }

// unconvertedValue is the value that stands for one whose conversion failed.
func unconvertedValue(err error) []byte {
	return append([]byte{unconvertedMagic}, err.Error()...)
}

// storedObject is a decoded stored value header.
type storedObject struct {
	json    []byte // the stored JSON (without resourceVersion)
	metaOff int    // offset of `"metadata"` in json
}

func parseStored(v []byte) (storedObject, error) {
	if len(v) > 0 && v[0] == unconvertedMagic {
		return storedObject{}, unconvertedError(v[1:])
	}
	if len(v) < 3 || v[0] != storedMagic || v[1] != storedVersion {
		return storedObject{}, errors.New("registry: stored value has an unknown format")
	}
	off, n := binary.Uvarint(v[2:])
	if n <= 0 {
		return storedObject{}, errors.New("registry: stored value header is corrupt")
	}
	body := v[2+n:]
	if off > uint64(len(body)) || !bytes.HasPrefix(body[off:], []byte(metaKey)) {
		return storedObject{}, errors.New("registry: stored value metadata offset is corrupt")
	}
	return storedObject{json: body, metaOff: int(off)}, nil
}

// objectJSON returns the object's JSON with resourceVersion rv (0: none) and
// its type fields, in a new slice of the size it needs.
func (s storedObject) objectJSON(rv int64) []byte {
	return s.appendJSON(make([]byte, 0, len(s.json)+len(`"resourceVersion":"",`)+20), rv, true)
}

// appendJSON appends the object's JSON with resourceVersion rv to dst. With
// typeMeta false, kind and apiVersion are left out. rv 0 leaves the
// resourceVersion out (a dry-run create has none).
func (s storedObject) appendJSON(dst []byte, rv int64, typeMeta bool) []byte {
	if typeMeta {
		if rv <= 0 {
			return append(dst, s.json...)
		}
		dst = append(dst, s.json[:s.metaOff+len(metaKey)]...)
	} else {
		dst = append(dst, '{')
		if rv <= 0 {
			return append(dst, s.json[s.metaOff:]...)
		}
		dst = append(dst, s.json[s.metaOff:s.metaOff+len(metaKey)]...)
	}
	ins := s.metaOff + len(metaKey)
	dst = append(dst, `"resourceVersion":"`...)
	dst = strconv.AppendInt(dst, rv, 10)
	dst = append(dst, `",`...)
	return append(dst, s.json[ins:]...)
}

// decodeObject decodes JSON into a generic object keeping numbers exact
// (json.Number), with kapi's decoder: stored values and the objects made
// from them are decoded on every update, patch and delete.
func decodeObject(data []byte) (Object, error) {
	v, _, err := codec.DecodeStoredJSON(data)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object: %.20q", data)
	}
	return obj, nil
}

// decodeStored decodes a stored value into a generic object with its
// resourceVersion set.
func decodeStored(v []byte, rv int64) (Object, error) {
	so, err := parseStored(v)
	if err != nil {
		return nil, err
	}
	return decodeObject(so.appendJSON(nil, rv, true))
}

// StoredJSON returns the JSON of a stored object value, as a storage list or
// watch under Registry.KeyPrefix returns it, without
// metadata.resourceVersion (the value's revision is its resourceVersion).
// It shares value's memory: do not modify it. A value that is not a stored
// object (the registry's own records under KeyPrefix) is an error.
func StoredJSON(value []byte) ([]byte, error) {
	so, err := parseStored(value)
	if err != nil {
		return nil, err
	}
	return so.json, nil
}

// StoredMetadataMayHave reports whether the metadata of a stored object
// value may have one of keys (as "ownerReferences") among its own members:
// false means certainly none, true means decode and see. It reads only the
// keys of the metadata object (stored objects begin with it), in one pass
// that stops at its end, and decodes nothing, so that a controller
// following all of storage passes over the objects it has no business with
// for the cost of a byte scan. A value it cannot read that way answers true.
func StoredMetadataMayHave(value []byte, keys ...string) bool {
	so, err := parseStored(value)
	if err != nil {
		return true
	}
	found, ok := metadataHasKey(so.json[so.metaOff+len(metaKey)-1:], keys...)
	return found || !ok
}

// metadataHasKey reports whether the JSON object that obj begins with has
// one of keys among its own (not nested) members. Keys are compared as they
// are written (encodeStored never escapes a letter). ok is false when obj is
// not a well-formed object up to its closing brace.
func metadataHasKey(obj []byte, keys ...string) (found, ok bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return false, false
	}
	depth := 0
	expectKey := false
	for i := 0; i < len(obj); i++ {
		switch c := obj[i]; c {
		case '"':
			start := i + 1
			for i++; i < len(obj) && obj[i] != '"'; i++ {
				if obj[i] == '\\' {
					i++
				}
			}
			if i >= len(obj) {
				return false, false
			}
			if depth == 1 && expectKey {
				k := obj[start:i]
				for _, want := range keys {
					if string(k) == want {
						return true, true
					}
				}
				expectKey = false
			}
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
			if depth == 0 {
				return false, true
			}
		case ',':
			expectKey = depth == 1
		}
	}
	return false, false
}
