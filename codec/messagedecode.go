package codec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

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
		return decodeMapEntry(out, f, typ, v)
	case f.Repeated:
		list, _ := out[f.Name].([]any)
		if typ == protowire.BytesType && isPackable(f.Kind) {
			list, err := decodePacked(list, f, v)
			if err != nil {
				return err
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

// decodeTime decodes a meta/v1 Time or MicroTime message (k) to its RFC 3339
// string; nil for the zero time.
func decodeTime(k Kind, v []byte) (any, error) {
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
	if k == Time {
		return time.Unix(sec, 0).UTC().Format(time.RFC3339), nil
	}
	if nanos < 0 || nanos > 999999999 {
		return nil, fmt.Errorf("nanos %d out of range", nanos)
	}
	return time.Unix(sec, nanos).UTC().Format("2006-01-02T15:04:05.000000Z07:00"), nil
}

// decodeQuantity decodes a resource.Quantity message to its string.
func decodeQuantity(v []byte) (any, error) {
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
}

// decodeIntOrString decodes an intstr.IntOrString message to a string or a
// number.
func decodeIntOrString(v []byte) (any, error) {
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
}

// decodeRawJSON decodes the JSON text in field 1 of a message; nil when
// there is none.
func decodeRawJSON(v []byte) (any, error) {
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
}

// decodeMapEntry decodes an entry message (key = 1, value = 2) of map
// field f into out.
func decodeMapEntry(out map[string]any, f *Field, typ protowire.Type, v []byte) error {
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
}

// decodePacked appends the packed scalars v of repeated field f to list.
func decodePacked(list []any, f *Field, v []byte) ([]any, error) {
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
			return nil, protowire.ParseError(n)
		}
		if val == nil {
			return nil, errors.New("invalid number")
		}
		list = append(list, val)
		v = v[n:]
	}
	return list, nil
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
	case StringList:
		return []any{}
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
		return decodeTime(f.Kind, v)
	case Quantity:
		return decodeQuantity(v)
	case IntOrString:
		return decodeIntOrString(v)
	case RawJSON:
		return decodeRawJSON(v)
	case MessageKind:
		if into == nil {
			into = map[string]any{}
		}
		if err := f.Message.decodeInto(into, v); err != nil {
			return nil, err
		}
		return into, nil
	case StringList:
		items := map[string]any{}
		err := Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != stringItems.Number {
				return nil
			}
			return decodeField(items, &stringItems, typ, v)
		})
		if err != nil {
			return nil, err
		}
		if items["items"] == nil {
			return []any{}, nil
		}
		return items["items"], nil
	}
	return nil, fmt.Errorf("unsupported kind %v", f.Kind)
}
