package codec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind is the type of a protobuf field of a Message, with the JSON form it
// maps to.
type Kind uint8

// Field kinds. Each names the JSON value and the protobuf encoding; they
// cover the types of Kubernetes' generated.proto files.
const (
	// String is a JSON string and a protobuf string.
	String Kind = iota + 1
	// Bytes is a base64 JSON string and protobuf bytes.
	Bytes
	// Bool is a JSON boolean and a protobuf bool.
	Bool
	// Int32 is a JSON integer and a protobuf int32.
	Int32
	// Int64 is a JSON integer and a protobuf int64.
	Int64
	// Double is a JSON number and a protobuf double.
	Double
	// Time is an RFC 3339 JSON string (second precision) and a meta/v1 Time
	// message (seconds = 1, nanos = 2).
	Time
	// MicroTime is an RFC 3339 JSON string with microseconds and a meta/v1
	// MicroTime message (seconds = 1, nanos = 2).
	MicroTime
	// Quantity is a JSON string (or number) and a resource.Quantity message
	// (string = 1).
	Quantity
	// IntOrString is a JSON integer or string and an intstr.IntOrString
	// message (type = 1, intVal = 2, strVal = 3).
	IntOrString
	// RawJSON is any JSON value carried as its JSON text in field 1 of a
	// message: the shape of runtime.RawExtension and meta/v1 FieldsV1.
	RawJSON
	// MessageKind is a JSON object and a nested message (Field.Message).
	MessageKind
)

var kindNames = [...]string{String: "string", Bytes: "bytes", Bool: "bool", Int32: "int32", Int64: "int64", Double: "double",
	Time: "Time", MicroTime: "MicroTime", Quantity: "Quantity", IntOrString: "IntOrString", RawJSON: "RawJSON", MessageKind: "message"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Field is one field of a Message: the JSON name of a generic object's field
// and the protobuf field it travels in.
type Field struct {
	// Name is the JSON field name, e.g. "metadata".
	Name string
	// Number is the protobuf field number.
	Number protowire.Number
	// Kind is the type of the value (of each element for Repeated, of each
	// value for Map).
	Kind Kind
	// Message describes the nested message for Kind MessageKind.
	Message *Message
	// Repeated maps a JSON array onto a repeated field.
	Repeated bool
	// Map maps a JSON object with string keys onto map<string, Kind>.
	Map bool
	// Keep keeps a zero value read from protobuf in the decoded object: set
	// it for optional pointer fields (Go *bool, *int64), whose presence
	// matters. Other zero values are left out, as JSON's omitempty does.
	Keep bool
}

// Message describes a protobuf message wire-compatible with a Kubernetes
// type, by the JSON names of its fields. It transcodes the JSON form of an
// object to protobuf and decodes protobuf into the generic form
// (map[string]any, as DecodeJSON returns). JSON fields the message does not
// describe are not encoded; unknown protobuf fields are skipped.
//
// A Message is immutable and safe for concurrent use.
type Message struct {
	name   string
	fields []Field
	byName map[string]int
	byNum  map[protowire.Number]int
}

// NewMessage returns the description of a message. It fails on an invalid
// description: duplicate names or numbers, a bad number, a message field
// without Message, or a field both Map and Repeated.
func NewMessage(name string, fields ...Field) (*Message, error) {
	m := &Message{name: name, fields: append([]Field(nil), fields...), byName: map[string]int{}, byNum: map[protowire.Number]int{}}
	for i, f := range m.fields {
		switch {
		case f.Name == "":
			return nil, fmt.Errorf("codec: message %s: field %d has no name", name, f.Number)
		case !f.Number.IsValid():
			return nil, fmt.Errorf("codec: message %s: field %s has invalid number %d", name, f.Name, f.Number)
		case f.Kind < String || f.Kind > MessageKind:
			return nil, fmt.Errorf("codec: message %s: field %s has invalid kind %d", name, f.Name, f.Kind)
		case (f.Kind == MessageKind) != (f.Message != nil):
			return nil, fmt.Errorf("codec: message %s: field %s: Message is set if and only if Kind is MessageKind", name, f.Name)
		case f.Map && f.Repeated:
			return nil, fmt.Errorf("codec: message %s: field %s is both Map and Repeated", name, f.Name)
		}
		if _, dup := m.byName[f.Name]; dup {
			return nil, fmt.Errorf("codec: message %s: duplicate field name %s", name, f.Name)
		}
		if _, dup := m.byNum[f.Number]; dup {
			return nil, fmt.Errorf("codec: message %s: duplicate field number %d", name, f.Number)
		}
		m.byName[f.Name] = i
		m.byNum[f.Number] = i
	}
	return m, nil
}

// MustMessage is NewMessage for descriptions known to be valid; it panics
// otherwise.
func MustMessage(name string, fields ...Field) *Message {
	m, err := NewMessage(name, fields...)
	if err != nil {
		panic(err)
	}
	return m
}

// Name returns the message name given to NewMessage.
func (m *Message) Name() string { return m.name }

// Fields returns a copy of the message's fields.
func (m *Message) Fields() []Field { return append([]Field(nil), m.fields...) }

// FieldError is an error about one field of a message, by JSON path.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return "field " + e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(name string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		sep := "."
		if strings.HasPrefix(fe.Path, "[") {
			sep = ""
		}
		return &FieldError{Path: name + sep + fe.Path, Err: fe.Err}
	}
	return &FieldError{Path: name, Err: err}
}

// ---- JSON to protobuf ---------------------------------------------------

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
	case RawJSON:
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
	case MessageKind:
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst, start := beginLen(dst)
		var err error
		if dst, err = e.message(dst, f.Message); err != nil {
			return dst, err
		}
		return endLen(dst, start), nil
	}
	return dst, fmt.Errorf("unsupported kind %v", f.Kind)
}

// ---- protobuf to generic ------------------------------------------------

// Unmarshal decodes the protobuf encoding of the message into the generic
// form: map[string]any with json.Number numbers, as DecodeJSON returns.
// Truncated or malformed input and wire types that do not match the
// description are errors.
func (m *Message) Unmarshal(b []byte) (map[string]any, error) {
	out := map[string]any{}
	if err := m.decodeInto(out, b); err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Message) decodeInto(out map[string]any, b []byte) error {
	err := Walk(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		i, ok := m.byNum[num]
		if !ok {
			return nil
		}
		f := &m.fields[i]
		if err := decodeField(out, f, typ, v); err != nil {
			return fieldErr(f.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Zero values of plain fields are left out, as omitempty would.
	for _, f := range m.fields {
		if f.Keep || f.Repeated || f.Map || f.Kind == MessageKind {
			continue
		}
		if v, ok := out[f.Name]; ok && isZero(v) {
			delete(out, f.Name)
		}
	}
	return nil
}

func isZero(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case bool:
		return !v
	case json.Number:
		return v == "0"
	case nil:
		return true
	}
	return false
}

func decodeField(out map[string]any, f *Field, typ protowire.Type, v []byte) error {
	switch {
	case f.Map:
		if typ != protowire.BytesType {
			return wireTypeError(typ)
		}
		var key string
		var val any
		hasVal := false
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case 1:
				if typ != protowire.BytesType {
					return wireTypeError(typ)
				}
				key = fixUTF8(v)
			case 2:
				var err error
				if val, err = decodeValue(f, typ, v, nil); err != nil {
					return err
				}
				hasVal = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !hasVal {
			val = zeroValue(f)
		}
		mv, _ := out[f.Name].(map[string]any)
		if mv == nil {
			mv = map[string]any{}
			out[f.Name] = mv
		}
		mv[key] = val
		return nil
	case f.Repeated:
		list, _ := out[f.Name].([]any)
		if typ == protowire.BytesType && isPackable(f.Kind) {
			// Packed scalars.
			for len(v) > 0 {
				var n int
				var val any
				switch f.Kind {
				case Double:
					x, m := protowire.ConsumeFixed64(v)
					n = m
					if m >= 0 {
						val = floatNumber(math.Float64frombits(x))
					}
				default:
					x, m := protowire.ConsumeVarint(v)
					n = m
					if m >= 0 {
						val = varintValue(f.Kind, x)
					}
				}
				if n < 0 {
					return protowire.ParseError(n)
				}
				if val == nil {
					return errors.New("invalid number")
				}
				list = append(list, val)
				v = v[n:]
			}
			out[f.Name] = list
			return nil
		}
		val, err := decodeValue(f, typ, v, nil)
		if err != nil {
			return err
		}
		if val == nil {
			val = zeroValue(f)
		}
		out[f.Name] = append(list, val)
		return nil
	}
	var into map[string]any
	if f.Kind == MessageKind {
		into, _ = out[f.Name].(map[string]any) // repeated occurrences merge
	}
	val, err := decodeValue(f, typ, v, into)
	if err != nil {
		return err
	}
	if val == nil {
		delete(out, f.Name)
		return nil
	}
	out[f.Name] = val
	return nil
}

func isPackable(k Kind) bool { return k == Bool || k == Int32 || k == Int64 || k == Double }

func zeroValue(f *Field) any {
	switch f.Kind {
	case String, Bytes, Quantity:
		return ""
	case Bool:
		return false
	case Int32, Int64, Double, IntOrString:
		return json.Number("0")
	case MessageKind:
		return map[string]any{}
	}
	return nil
}

func varintValue(k Kind, x uint64) any {
	switch k {
	case Bool:
		return protowire.DecodeBool(x)
	case Int32:
		return json.Number(strconv.FormatInt(int64(int32(x)), 10))
	}
	return json.Number(strconv.FormatInt(int64(x), 10))
}

func floatNumber(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

func wireTypeError(typ protowire.Type) error {
	return fmt.Errorf("unexpected wire type %d", typ)
}

// decodeValue decodes one value of f's kind. nil means "absent" (a zero
// time).
func decodeValue(f *Field, typ protowire.Type, v []byte, into map[string]any) (any, error) {
	want := protowire.BytesType
	switch f.Kind {
	case Bool, Int32, Int64:
		want = protowire.VarintType
	case Double:
		want = protowire.Fixed64Type
	}
	if typ != want {
		return nil, wireTypeError(typ)
	}
	switch f.Kind {
	case String:
		return fixUTF8(v), nil // as JSON decoding does
	case Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case Bool, Int32, Int64:
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		return varintValue(f.Kind, x), nil
	case Double:
		x, n := protowire.ConsumeFixed64(v)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		val := floatNumber(math.Float64frombits(x))
		if val == nil {
			return nil, errors.New("NaN and infinity are not valid JSON numbers")
		}
		return val, nil
	case Time, MicroTime:
		var sec, nanos int64
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != 1 && num != 2 {
				return nil
			}
			if typ != protowire.VarintType {
				return wireTypeError(typ)
			}
			x, _ := protowire.ConsumeVarint(v)
			if num == 1 {
				sec = int64(x)
			} else {
				nanos = int64(int32(x))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			return nil, nil // the zero time: null
		}
		// Years beyond 9999 (or before 0) are not RFC 3339.
		if sec < -62167219200 || sec > 253402300799 {
			return nil, fmt.Errorf("time %d out of range", sec)
		}
		if f.Kind == Time {
			return time.Unix(sec, 0).UTC().Format(time.RFC3339), nil
		}
		if nanos < 0 || nanos > 999999999 {
			return nil, fmt.Errorf("nanos %d out of range", nanos)
		}
		return time.Unix(sec, nanos).UTC().Format("2006-01-02T15:04:05.000000Z07:00"), nil
	case Quantity:
		var s string
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num == 1 {
				if typ != protowire.BytesType {
					return wireTypeError(typ)
				}
				s = fixUTF8(v)
			}
			return nil
		})
		return s, err
	case IntOrString:
		var kind uint64
		var iv int32
		var sv string
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case 1, 2:
				if typ != protowire.VarintType {
					return wireTypeError(typ)
				}
				x, _ := protowire.ConsumeVarint(v)
				if num == 1 {
					kind = x
				} else {
					iv = int32(x)
				}
			case 3:
				if typ != protowire.BytesType {
					return wireTypeError(typ)
				}
				sv = fixUTF8(v)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if kind == 1 {
			return sv, nil
		}
		return json.Number(strconv.FormatInt(int64(iv), 10)), nil
	case RawJSON:
		var raw []byte
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num == 1 {
				if typ != protowire.BytesType {
					return wireTypeError(typ)
				}
				raw = v
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			return nil, nil
		}
		val, _, err := DecodeJSON(raw)
		if err != nil {
			return nil, err
		}
		return val, nil
	case MessageKind:
		if into == nil {
			into = map[string]any{}
		}
		if err := f.Message.decodeInto(into, v); err != nil {
			return nil, err
		}
		return into, nil
	}
	return nil, fmt.Errorf("unsupported kind %v", f.Kind)
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
