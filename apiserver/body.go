package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/internal/bufpool"
	"github.com/kapi-dev/kapi/meta"
)

// Request bodies: JSON, YAML and, for types with a protobuf message,
// protobuf in the Kubernetes envelope. The media type of the body is
// checked before the body is read.

// readBody reads and decodes the body of a request to st (JSON, YAML, or
// protobuf for types with a protobuf message) into a generic object. Duplicate fields are
// returned as field validation problems. The media type is checked before
// the body is read: an unsupported one is 415.
func (s *Server) readBody(r *http.Request, st *registry.Store, info requestInfo) (registry.Object, []string, error) {
	target := bodyTargetOf(st, info)
	mt, err := bodyMediaType(r, target.msg != nil)
	if err != nil {
		return nil, nil, err
	}
	// Every decoder copies what it keeps (strings, base64 of bytes): the
	// body's bytes are free again once decoded (FuzzDecodeBody checks).
	bp := bodyBuffers.Get()
	defer bodyBuffers.Put(bp, maxPooledBody)
	data, err := readAllSized(*bp, http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes), r.ContentLength, s.cfg.MaxRequestBodyBytes)
	*bp = data
	if err != nil {
		return nil, nil, bodyReadError(err, s.cfg.MaxRequestBodyBytes)
	}
	target.yamlAliasBytes = int(s.cfg.MaxRequestBodyBytes)
	obj, dups, err := decodeBody(mt, data, target)
	if err == nil && info.Subresource != "scale" && isCustomResource(st.Resource()) {
		err = customTypeMeta(obj, data, target.apiVersion)
	}
	return obj, dups, err
}

// readObjectWrite reads what a create or an update sends: the options in its
// query (kind, CreateOptions or UpdateOptions, names them in errors), with
// the user agent as the default field manager, and its body, decoded, with
// the duplicate fields found in it.
func (s *Server) readObjectWrite(r *http.Request, st *registry.Store, info requestInfo, kind string) (registry.WriteOptions, registry.Object, []string, error) {
	opts, err := writeOptions(queryOf(r), kind)
	if err != nil {
		return opts, nil, nil, err
	}
	opts.FieldManager = managerOrUserAgent(opts.FieldManager, r.UserAgent())
	obj, dups, err := s.readBody(r, st, info)
	return opts, obj, dups, err
}

// customTypeMeta refuses the body of a custom resource without kind or
// apiVersion, as kube-apiserver's decoding of custom resources does; it
// fills them from the URL only for its built-in types (checkTypeMeta).
// Protobuf bodies carry both in their envelope.
func customTypeMeta(obj registry.Object, data []byte, apiVersion string) error {
	if k, _ := obj["kind"].(string); k == "" {
		const most = 1 << 10 // of the body quoted back
		quoted := string(data[:min(len(data), most)])
		if len(data) > most {
			quoted += "..."
		}
		return meta.NewBadRequest(fmt.Sprintf("Object 'Kind' is missing in '%s'", quoted))
	}
	if av, _ := obj["apiVersion"].(string); av == "" {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data () does not match the expected API version (%s)", apiVersion))
	}
	return nil
}

// bodyBuffers holds the buffers request bodies are read into (readBody);
// maxPooledBody bounds the ones kept, so that a rare large body does not pin
// its buffer.
var bodyBuffers = bufpool.New(4096)

const maxPooledBody = 64 << 10

// readAllSized is io.ReadAll into buf (reused when large enough) with the
// buffer sized for a body of the declared length (when it is known and
// within limit), so that a body is read into one allocation at most instead
// of a series of growing ones.
func readAllSized(buf []byte, r io.Reader, length, limit int64) ([]byte, error) {
	b := buf[:0]
	if length > 0 && length <= limit && int64(cap(b)) < length+1 {
		// One byte more than declared, so that the read that finds the end
		// does not have to grow the buffer.
		b = make([]byte, 0, length+1)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
	}
}

// bodyTarget is what a request body must hold.
type bodyTarget struct {
	kind, apiVersion string
	msg              *codec.Message // nil: no protobuf
	// yamlAliasBytes bounds what YAML aliases may add (the body limit);
	// zero is codec.DefaultYAMLAliasBytes.
	yamlAliasBytes int
}

// bodyTargetOf returns what the body of a request to st (info) must be: an
// object of st's resource, or a Scale for /scale.
func bodyTargetOf(st *registry.Store, info requestInfo) bodyTarget {
	if info.Subresource == "scale" {
		return bodyTarget{kind: "Scale", apiVersion: "autoscaling/v1", msg: codec.ScaleMessage}
	}
	res := st.Resource()
	return bodyTarget{kind: res.Kind, apiVersion: res.APIVersion(), msg: res.Protobuf}
}

// bodyMediaType checks the Content-Type of a body: JSON (also when absent),
// YAML, or protobuf when protobufOK; anything else is 415.
func bodyMediaType(r *http.Request, protobufOK bool) (string, error) {
	ct := r.Header.Get("Content-Type")
	switch {
	case ct == codec.MediaJSON, ct == codec.MediaYAML:
		return ct, nil // as clients send them: no parameters to parse
	case strings.TrimSpace(ct) == "":
		return codec.MediaJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == codec.MediaJSON, mt == codec.MediaYAML:
		return mt, nil
	case mt == codec.MediaProtobuf && protobufOK:
		return mt, nil
	}
	types := []string{codec.MediaJSON, codec.MediaYAML}
	if protobufOK {
		types = append(types, codec.MediaProtobuf)
	}
	se := meta.NewUnsupportedMediaType(ct)
	se.Status.Message = "the body of the request was in an unknown format - accepted media types include: " + strings.Join(types, ", ")
	return "", se
}

// decodeBody decodes a body of media type mt into a generic object.
// problems are field validation findings (duplicate fields).
func decodeBody(mt string, data []byte, t bodyTarget) (registry.Object, []string, error) {
	var (
		v    any
		dups []string
		err  error
	)
	switch mt {
	case codec.MediaProtobuf:
		obj, err := decodeProtobufBody(data, t)
		return obj, nil, err
	case codec.MediaYAML:
		if v, dups, err = decodeYAML(data, t.yamlAliasBytes); err != nil {
			return nil, nil, meta.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
	default:
		if v, dups, err = codec.DecodeJSON(data); err != nil {
			return nil, nil, meta.NewBadRequest(fmt.Sprintf("error decoding the request body: %v", err))
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, meta.NewBadRequest("error decoding the request body: the body must be an object")
	}
	problems := make([]string, 0, len(dups))
	for _, d := range dups {
		problems = append(problems, fmt.Sprintf("duplicate field %q", d))
	}
	return obj, problems, nil
}

// decodeYAML is codec.DecodeYAMLLimit with aliasBytes, or its default.
func decodeYAML(data []byte, aliasBytes int) (any, []string, error) {
	if aliasBytes <= 0 {
		aliasBytes = codec.DefaultYAMLAliasBytes
	}
	return codec.DecodeYAMLLimit(data, aliasBytes)
}

// bodyReadError is the Status for a request body that could not be read:
// 413 beyond the size limit, 504 when the client did not send it within the
// request's time (Config.RequestTimeout), 400 otherwise.
func bodyReadError(err error, limit int64) *meta.StatusError {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return meta.NewRequestEntityTooLarge(fmt.Sprintf("the request body is larger than the limit of %d bytes", limit))
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		se := meta.NewTimeout("Timeout: the request body was not received within the allotted time", 0)
		se.Status.Details = nil
		return se
	}
	return meta.NewBadRequest(fmt.Sprintf("error reading the request body: %v", err))
}

// decodeProtobufBody decodes an enveloped protobuf object of the target
// type, refusing other types, other encodings and malformed data.
func decodeProtobufBody(data []byte, t bodyTarget) (registry.Object, error) {
	u, err := codec.DecodeEnvelope(data)
	if err != nil {
		if errors.Is(err, codec.ErrNotProtobuf) {
			return nil, meta.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v", t.kind, err))
		}
		return nil, meta.NewBadRequest(fmt.Sprintf("error decoding the request body as protobuf %s: %v", t.kind, err))
	}
	if u.Kind != t.kind || u.APIVersion != t.apiVersion {
		return nil, meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the body must be a %s of %s", u.Kind, u.APIVersion, t.kind, t.kind, t.apiVersion))
	}
	if u.ContentEncoding != "" || (u.ContentType != "" && u.ContentType != codec.MediaProtobuf) {
		return nil, meta.NewBadRequest(fmt.Sprintf("error decoding the request body: unsupported content encoding %q or type %q in the protobuf envelope", u.ContentEncoding, u.ContentType))
	}
	obj, err := t.msg.Unmarshal(u.Raw)
	if err != nil {
		return nil, meta.NewBadRequest(fmt.Sprintf("error decoding the request body as protobuf %s: %v", t.kind, err))
	}
	obj["kind"], obj["apiVersion"] = u.Kind, u.APIVersion
	return obj, nil
}

// deleteOptionsJSON returns a DeleteOptions body as JSON, whatever its media
// type (client-go's protobuf clients send it as protobuf).
func deleteOptionsJSON(r *http.Request, body []byte) ([]byte, error) {
	mt, err := bodyMediaType(r, true)
	if err != nil {
		return nil, err
	}
	switch mt {
	case codec.MediaProtobuf:
		u, err := codec.DecodeEnvelope(body)
		if err != nil {
			return nil, meta.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
		}
		if u.Kind != "DeleteOptions" {
			return nil, meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a DeleteOptions", u.Kind, u.APIVersion))
		}
		obj, err := codec.DeleteOptionsMessage.Unmarshal(u.Raw)
		if err != nil {
			return nil, meta.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
		}
		return json.Marshal(obj)
	case codec.MediaYAML:
		v, _, err := decodeYAML(body, len(body))
		if err != nil {
			return nil, meta.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
		}
		return json.Marshal(v)
	}
	return body, nil
}
