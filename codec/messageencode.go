package codec

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// AppendProtobuf transcodes the JSON object data to the message's protobuf
// encoding, appended to dst. It reads the JSON once and builds no values.
func (m *Message) AppendProtobuf(dst, data []byte) ([]byte, error) {
	var t Transcoder
	return t.AppendProtobuf(dst, m, data)
}

// Transcoder transcodes JSON to protobuf like Message.AppendProtobuf,
// reusing its buffers from one call to the next: use one to encode the
// items of a list. It is not safe for concurrent use.
type Transcoder struct {
	e transcoder
}

// AppendProtobuf transcodes the JSON object data to m's protobuf encoding,
// appended to dst.
func (t *Transcoder) AppendProtobuf(dst []byte, m *Message, data []byte) ([]byte, error) {
	t.e.s = scanner{lexer{data: data}}
	dst, err := t.e.message(dst, m)
	if err == nil {
		err = t.e.s.end()
	}
	t.e.s = scanner{}
	return dst, err
}

// Marshal encodes a generic object (map[string]any as DecodeJSON returns,
// or anything encoding/json marshals to an object) as the message.
func (m *Message) Marshal(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return m.AppendProtobuf(nil, data)
}

type transcoder struct {
	s       scanner
	scratch []byte
}

// beginLen reserves one byte for a length prefix and returns where the
// content starts; endLen writes the length, moving the content when the
// length needs more than one byte.
func beginLen(dst []byte) ([]byte, int) {
	dst = append(dst, 0)
	return dst, len(dst)
}

func endLen(dst []byte, start int) []byte {
	n := len(dst) - start
	if n < 0x80 {
		dst[start-1] = byte(n)
		return dst
	}
	size := protowire.SizeVarint(uint64(n))
	for i := 1; i < size; i++ {
		dst = append(dst, 0)
	}
	copy(dst[start+size-1:], dst[start:start+n])
	protowire.AppendVarint(dst[start-1:start-1], uint64(n))
	return dst
}

func (e *transcoder) message(dst []byte, m *Message) ([]byte, error) {
	if e.s.peek() != '{' {
		return dst, e.s.errorf("expected an object for message %s", m.name)
	}
	empty, err := e.s.openObject()
	if err != nil || empty {
		return dst, err
	}
	for {
		key, err := e.s.key(nil)
		if err != nil {
			return dst, err
		}
		if i, ok := m.byName[string(key)]; ok {
			f := &m.fields[i]
			if dst, err = e.field(dst, f); err != nil {
				return dst, fieldErr(f.Name, err)
			}
		} else if _, err := e.s.skipValue(); err != nil {
			return dst, err
		}
		if more, err := e.s.next(); err != nil || !more {
			return dst, err
		}
	}
}

func (e *transcoder) field(dst []byte, f *Field) ([]byte, error) {
	if null, err := e.s.null(); null || err != nil {
		return dst, err
	}
	switch {
	case f.Map:
		if e.s.peek() != '{' {
			return dst, e.s.errorf("expected an object")
		}
		empty, err := e.s.openObject()
		if err != nil || empty {
			return dst, err
		}
		for {
			key, err := e.s.key(nil)
			if err != nil {
				return dst, err
			}
			dst = protowire.AppendTag(dst, f.Number, protowire.BytesType)
			var start int
			dst, start = beginLen(dst)
			dst = protowire.AppendTag(dst, 1, protowire.BytesType)
			dst = protowire.AppendBytes(dst, key)
			if null, err := e.s.null(); err != nil {
				return dst, err
			} else if !null {
				// key stays valid: it is a slice of the input or a fresh
				// copy (key gets no buffer to reuse).
				if dst, err = e.value(dst, 2, f); err != nil {
					return dst, fieldErr(jsonPathKey(key), err)
				}
			}
			dst = endLen(dst, start)
			if more, err := e.s.next(); err != nil || !more {
				return dst, err
			}
		}
	case f.Repeated:
		if e.s.peek() != '[' {
			return dst, e.s.errorf("expected an array")
		}
		empty, err := e.s.openArray()
		if err != nil || empty {
			return dst, err
		}
		for i := 0; ; i++ {
			if null, err := e.s.null(); err != nil {
				return dst, err
			} else if null {
				dst = appendZero(dst, f)
			} else if dst, err = e.value(dst, f.Number, f); err != nil {
				return dst, fieldErr("["+strconv.Itoa(i)+"]", err)
			}
			if more, err := e.s.nextElem(); err != nil || !more {
				return dst, err
			}
		}
	}
	return e.value(dst, f.Number, f)
}

// appendZero appends the zero value of a field's kind (a null element).
func appendZero(dst []byte, f *Field) []byte {
	switch f.Kind {
	case Bool, Int32, Int64:
		dst = protowire.AppendTag(dst, f.Number, protowire.VarintType)
		return protowire.AppendVarint(dst, 0)
	case Double:
		dst = protowire.AppendTag(dst, f.Number, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, 0)
	}
	dst = protowire.AppendTag(dst, f.Number, protowire.BytesType)
	return protowire.AppendVarint(dst, 0)
}

func jsonPathKey(key []byte) string {
	k := string(key)
	if strings.ContainsAny(k, ".[]") {
		return "[" + strconv.Quote(k) + "]"
	}
	return k
}

// value appends one value of f's kind as field num.
func (e *transcoder) value(dst []byte, num protowire.Number, f *Field) ([]byte, error) {
	s := &e.s
	switch f.Kind {
	case String:
		var err error
		if e.scratch, err = s.appendString(e.scratch[:0]); err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		return protowire.AppendBytes(dst, e.scratch), nil
	case Bytes:
		return e.bytesValue(dst, num)
	case Bool:
		b, err := s.boolean()
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, num, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeBool(b)), nil
	case Int32, Int64:
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if f.Kind == Int32 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		n, err := s.integer(lo, hi)
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, num, protowire.VarintType)
		return protowire.AppendVarint(dst, uint64(n)), nil
	case Double:
		text, err := s.number()
		if err != nil {
			return dst, err
		}
		v, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return dst, fmt.Errorf("invalid number %s", text)
		}
		dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, math.Float64bits(v)), nil
	case Time, MicroTime:
		return e.timeValue(dst, num, f)
	case Quantity:
		var text []byte
		var err error
		if s.peek() == '"' {
			e.scratch, err = s.appendString(e.scratch[:0])
			text = e.scratch
		} else {
			text, err = s.number()
		}
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst, start := beginLen(dst)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, text)
		return endLen(dst, start), nil
	case IntOrString:
		return e.intOrStringValue(dst, num)
	case RawJSON:
		return e.rawJSONValue(dst, num)
	case MessageKind:
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst, start := beginLen(dst)
		var err error
		if dst, err = e.message(dst, f.Message); err != nil {
			return dst, err
		}
		return endLen(dst, start), nil
	case StringList:
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst, start := beginLen(dst)
		var err error
		if dst, err = e.field(dst, &stringItems); err != nil {
			return dst, err
		}
		return endLen(dst, start), nil
	}
	return dst, fmt.Errorf("unsupported kind %v", f.Kind)
}

// stringItems is the one field of a StringList's message.
var stringItems = Field{Name: "items", Number: 1, Kind: String, Repeated: true}

// bytesValue appends a base64 JSON string as protobuf bytes, field num.
func (e *transcoder) bytesValue(dst []byte, num protowire.Number) ([]byte, error) {
	s := &e.s
	var err error
	if e.scratch, err = s.appendString(e.scratch[:0]); err != nil {
		return dst, err
	}
	n := base64.StdEncoding.DecodedLen(len(e.scratch))
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	// Decode in place after a worst-case length prefix, then fix it up.
	dst, start := beginLen(dst)
	dst = append(dst, make([]byte, n)...)
	w, err := base64.StdEncoding.Decode(dst[start:], e.scratch)
	if err != nil {
		return dst[:start-1], fmt.Errorf("illegal base64 data: %w", err)
	}
	return endLen(dst[:start+w], start), nil
}

// timeValue appends an RFC 3339 JSON string as field num, a meta/v1 Time
// or MicroTime message (f's kind).
func (e *transcoder) timeValue(dst []byte, num protowire.Number, f *Field) ([]byte, error) {
	s := &e.s
	var err error
	if e.scratch, err = s.appendString(e.scratch[:0]); err != nil {
		return dst, err
	}
	t, ok := parseUTCSeconds(e.scratch)
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(e.scratch)); err != nil {
			return dst, fmt.Errorf("invalid time %q: must be RFC 3339", e.scratch)
		}
	}
	nanos := 0
	if f.Kind == MicroTime {
		nanos = t.Nanosecond() / 1000 * 1000
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst, start := beginLen(dst)
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(t.Unix()))
	dst = protowire.AppendTag(dst, 2, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(int64(nanos)))
	return endLen(dst, start), nil
}

// intOrStringValue appends a JSON integer or string as field num, an
// intstr.IntOrString message.
func (e *transcoder) intOrStringValue(dst []byte, num protowire.Number) ([]byte, error) {
	s := &e.s
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst, start := beginLen(dst)
	if s.peek() == '"' {
		var err error
		if e.scratch, err = s.appendString(e.scratch[:0]); err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 0)
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendBytes(dst, e.scratch)
	} else {
		n, err := s.integer(math.MinInt32, math.MaxInt32)
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 0)
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendVarint(dst, 0)
	}
	return endLen(dst, start), nil
}

// rawJSONValue appends any JSON value, compacted, as field 1 of the message
// field num.
func (e *transcoder) rawJSONValue(dst []byte, num protowire.Number) ([]byte, error) {
	s := &e.s
	s.spaced = false
	raw, err := s.skipValue()
	if err != nil {
		return dst, err
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst, start := beginLen(dst)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst, inner := beginLen(dst)
	if s.spaced {
		dst = appendCompact(dst, raw)
	} else {
		dst = append(dst, raw...)
	}
	dst = endLen(dst, inner)
	return endLen(dst, start), nil
}

// parseUTCSeconds parses the common form of a Kubernetes time,
// "2006-01-02T15:04:05Z", without allocating; other forms report false.
func parseUTCSeconds(b []byte) (time.Time, bool) {
	if len(b) != 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 2)
	d, ok3 := num(8, 2)
	h, ok4 := num(11, 2)
	mi, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC)
	if t.Day() != d { // February 30th and the like
		return time.Time{}, false
	}
	return t, true
}
