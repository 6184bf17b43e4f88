package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// ProtobufMagic prefixes every Kubernetes protobuf message.
var ProtobufMagic = []byte{'k', '8', 's', 0}

// Unknown is the envelope of a Kubernetes protobuf message (runtime.Unknown):
// the type of the object and its encoding.
type Unknown struct {
	APIVersion      string
	Kind            string
	Raw             []byte
	ContentEncoding string
	ContentType     string
}

// ErrNotProtobuf is returned for data without the Kubernetes magic prefix.
var ErrNotProtobuf = errors.New("protobuf: provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")

// DecodeEnvelope checks the magic prefix and decodes the Unknown envelope.
// Raw aliases data. Malformed envelopes (truncated, fields of the wrong wire
// type) are errors.
func DecodeEnvelope(data []byte) (Unknown, error) {
	if !bytes.HasPrefix(data, ProtobufMagic) {
		return Unknown{}, ErrNotProtobuf
	}
	var u Unknown
	err := Walk(data[len(ProtobufMagic):], func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num < 1 || num > 4 {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("protobuf: envelope field %d has wire type %d, want bytes", num, typ)
		}
		switch num {
		case 1:
			return Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num != 1 && num != 2 {
					return nil
				}
				if typ != protowire.BytesType {
					return fmt.Errorf("protobuf: envelope typeMeta field %d has wire type %d, want bytes", num, typ)
				}
				if num == 1 {
					u.APIVersion = string(v)
				} else {
					u.Kind = string(v)
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
	out := AppendEnvelopeHeader(make([]byte, 0, len(raw)+len(apiVersion)+len(kind)+20), apiVersion, kind, len(raw))
	out = append(out, raw...)
	return AppendEnvelopeTrailer(out)
}

// AppendEnvelopeHeader appends everything of an envelope that comes before
// its raw message of rawLen bytes: the magic, the type and raw's tag and
// length. Write raw and AppendEnvelopeTrailer after it. The header lets a
// large message (a list) be written out without copying it into the
// envelope.
func AppendEnvelopeHeader(dst []byte, apiVersion, kind string, rawLen int) []byte {
	dst = append(dst, ProtobufMagic...)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(apiVersion))+protowire.SizeTag(2)+protowire.SizeBytes(len(kind))))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, apiVersion)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendString(dst, kind)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(rawLen))
}

// AppendEnvelopeTrailer appends the empty contentEncoding and contentType
// that follow raw (kube-apiserver writes them too).
func AppendEnvelopeTrailer(dst []byte) []byte {
	return append(dst, 0x1a, 0, 0x22, 0)
}

// Walk calls fn for every field of a protobuf message. Varint and fixed
// values are passed encoded (use protowire.ConsumeVarint); groups are
// refused.
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
		case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("protobuf: %w", protowire.ParseError(m))
			}
			v, n = b[:m], m
		default:
			return fmt.Errorf("protobuf: unsupported wire type %d", typ)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// ---- watch events -------------------------------------------------------

// AppendJSONWatchEvent appends one event of a JSON watch stream:
// {"type":TYPE,"object":OBJECT} and a newline. object is JSON.
func AppendJSONWatchEvent(dst []byte, typ string, object []byte) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","object":`...)
	dst = append(dst, object...)
	return append(dst, "}\n"...)
}

// AppendProtobufWatchEvent appends one frame of a protobuf watch stream: a
// 4-byte big-endian length, then a meta/v1 WatchEvent{type = 1, object = 2}
// whose object is a RawExtension holding the enveloped object.
func AppendProtobufWatchEvent(dst []byte, typ string, envelope []byte) []byte {
	obj := protowire.SizeTag(1) + protowire.SizeBytes(len(envelope))
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(typ)) + protowire.SizeTag(2) + protowire.SizeBytes(obj)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, typ)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(obj))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	return protowire.AppendBytes(dst, envelope)
}

// ReadFrame reads one length-prefixed frame of a protobuf watch stream,
// refusing frames longer than limit.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if int64(size) > int64(limit) {
		return nil, fmt.Errorf("protobuf: frame of %d bytes exceeds the limit of %d", size, limit)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// DecodeWatchEvent decodes a WatchEvent message (a frame without its length):
// the event type and the raw bytes of its object.
func DecodeWatchEvent(frame []byte) (typ string, object []byte, err error) {
	err = Walk(frame, func(num protowire.Number, wt protowire.Type, v []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if wt != protowire.BytesType {
			return fmt.Errorf("protobuf: WatchEvent field %d has wire type %d, want bytes", num, wt)
		}
		if num == 1 {
			typ = string(v)
			return nil
		}
		return Walk(v, func(num protowire.Number, wt protowire.Type, v []byte) error {
			if num == 1 {
				if wt != protowire.BytesType {
					return fmt.Errorf("protobuf: RawExtension field 1 has wire type %d, want bytes", wt)
				}
				object = v
			}
			return nil
		})
	})
	return typ, object, err
}

// BeginEmbedded appends the tag of field num as a length-delimited field
// (a nested message) and reserves its length; append the content, then call
// EndEmbedded with the returned start.
func BeginEmbedded(dst []byte, num protowire.Number) ([]byte, int) {
	return beginLen(protowire.AppendTag(dst, num, protowire.BytesType))
}

// EndEmbedded writes the length of the field begun at start.
func EndEmbedded(dst []byte, start int) []byte { return endLen(dst, start) }

// AppendEmbedded appends field num as a length-delimited field (a nested
// message) whose content fn appends, without a separate buffer.
func AppendEmbedded(dst []byte, num protowire.Number, fn func(dst []byte) ([]byte, error)) ([]byte, error) {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst, start := beginLen(dst)
	dst, err := fn(dst)
	if err != nil {
		return dst, err
	}
	return endLen(dst, start), nil
}
