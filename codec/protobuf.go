package codec

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ProtobufMagic prefixes every Kubernetes protobuf message.
var ProtobufMagic = []byte{'k', '8', 's', 0}

// Unknown is the envelope of a Kubernetes protobuf message.
type Unknown struct {
	APIVersion      string
	Kind            string
	Raw             []byte
	ContentEncoding string
	ContentType     string
}

// DecodeEnvelope checks the magic prefix and decodes the Unknown envelope.
func DecodeEnvelope(data []byte) (Unknown, error) {
	if !bytes.HasPrefix(data, ProtobufMagic) {
		return Unknown{}, errors.New("protobuf: the body does not start with the Kubernetes magic prefix")
	}
	var u Unknown
	err := Walk(data[len(ProtobufMagic):], func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			return Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if typ == protowire.BytesType {
					switch num {
					case 1:
						u.APIVersion = string(v)
					case 2:
						u.Kind = string(v)
					}
				}
				return nil
			})
		case 2:
			u.Raw = v
		case 3:
			u.ContentEncoding = string(v)
		case 4:
			u.ContentType = string(v)
		}
		return nil
	})
	if err != nil {
		return Unknown{}, err
	}
	return u, nil
}

// EncodeEnvelope wraps raw in the Kubernetes envelope.
func EncodeEnvelope(apiVersion, kind string, raw []byte) []byte {
	var tm []byte
	tm = protowire.AppendTag(tm, 1, protowire.BytesType)
	tm = protowire.AppendString(tm, apiVersion)
	tm = protowire.AppendTag(tm, 2, protowire.BytesType)
	tm = protowire.AppendString(tm, kind)
	out := append([]byte{}, ProtobufMagic...)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendBytes(out, tm)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, raw)
	return out
}

// Walk calls fn for every field of a protobuf message. Varint values are
// passed encoded (use protowire.ConsumeVarint); groups are refused.
func Walk(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("protobuf: %w", protowire.ParseError(m))
			}
			v, n = val, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("protobuf: %w", protowire.ParseError(m))
			}
			v, n = b[:m], m
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
