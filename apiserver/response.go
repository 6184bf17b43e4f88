package apiserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// Responses are negotiated here. Every handler produces its body as JSON
// (stored objects are JSON already) and hands it to writeRaw (any body: its
// kind is read from the JSON when the Accept header needs it), writeEncoded
// (a payload whose kind is known, negotiated before the storage read), or
// writeError. This file chooses the representation the Accept header asks
// for among those the body offers, converts the body when the client asked
// for a Table or PartialObjectMetadata (convert.go, table.go), encodes it
// (JSON, YAML or protobuf), and compresses large responses. Watch streams
// are encoded in watchencode.go; request bodies are decoded in body.go.

var (
	offerJSON = codec.MediaType{Type: "application", Subtype: "json"}
	offerYAML = codec.MediaType{Type: "application", Subtype: "yaml"}
)

// acceptedTypes is the list a 406 names for bodies that only have JSON and
// YAML.
var acceptedTypes = []string{codec.MediaJSON, codec.MediaYAML}

// gzipThreshold is the size from which responses are compressed for clients
// that accept gzip, as kube-apiserver (128 KiB).
const gzipThreshold = 128 << 10

// bodyKind classifies a response body for negotiation.
type bodyKind uint8

const (
	bodyOther  bodyKind = iota // discovery, OpenAPI, version: JSON and YAML
	bodyStatus                 // meta/v1 Status: also protobuf; never converted
	bodyObject                 // one object of the request's resource
	bodyList                   // a list of the request's resource
	bodyScale                  // autoscaling/v1 Scale: also protobuf
)

// payload is a response body before encoding.
type payload struct {
	kind bodyKind
	res  *registry.Resource // the request's resource, when there is one
	json []byte             // the body as JSON (for lists: built on demand)

	// Lists: the items (JSON objects) and the list metadata.
	items    [][]byte
	listMeta meta.ListMeta
}

// resourceOf returns the resource a request is about, if any.
func (s *Server) resourceOf(r *http.Request) *registry.Resource {
	info, ok, _ := resolveRequest(r)
	if !ok {
		return nil
	}
	st, ok := s.reg.Store(meta.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource})
	if !ok {
		return nil
	}
	return st.Resource()
}

// classify reads the kind of a JSON body.
func (s *Server) classify(r *http.Request, body []byte) payload {
	p := payload{kind: bodyOther, json: body, res: s.resourceOf(r)}
	kind, apiVersion, err := codec.TypeMeta(body)
	if err != nil {
		return p
	}
	switch {
	case kind == "Status" && apiVersion == "v1":
		p.kind = bodyStatus
	case kind == "Scale" && apiVersion == "autoscaling/v1":
		p.kind = bodyScale
	case p.res != nil && apiVersion == p.res.APIVersion() && kind == p.res.Kind:
		p.kind = bodyObject
	case p.res != nil && apiVersion == p.res.APIVersion() && kind == p.res.ListKind:
		p.kind = bodyList
		if err := p.splitList(); err != nil {
			p.kind = bodyOther
		}
	}
	return p
}

// splitList fills items and listMeta from a list body.
func (p *payload) splitList() error {
	raw, err := codec.TopLevelFields(p.json, "metadata", "items")
	if err != nil {
		return err
	}
	if raw[0] != nil {
		if err := json.Unmarshal(raw[0], &p.listMeta); err != nil {
			return err
		}
	}
	var items []json.RawMessage
	if raw[1] != nil {
		if err := json.Unmarshal(raw[1], &items); err != nil {
			return err
		}
	}
	p.items = make([][]byte, len(items))
	for i, it := range items {
		p.items[i] = it
	}
	return nil
}

// allows reports whether a body offers a representation. Error bodies are
// never converted.
func (p *payload) allows(c codec.Choice, isError bool) bool {
	if c.As != "" {
		if isError || p.res == nil {
			return false
		}
		switch p.kind {
		case bodyObject, bodyList, bodyStatus:
		case bodyScale: // a Table only (kubectl get --subresource=scale)
			return c.As == codec.AsTable && c.Format != codec.FormatProtobuf
		default:
			return false
		}
		// Tables are JSON or YAML (Kubernetes has no protobuf Table);
		// the meta types have protobuf messages.
		return c.As != codec.AsTable || c.Format != codec.FormatProtobuf
	}
	if c.Format != codec.FormatProtobuf {
		return true
	}
	switch p.kind {
	case bodyStatus, bodyScale:
		return true
	case bodyObject, bodyList:
		return p.res.Protobuf != nil
	}
	return false
}

// formats lists the media types a body has, for a 406.
func (p *payload) formats() []string {
	if p.allows(codec.Choice{Format: codec.FormatProtobuf}, false) {
		return []string{codec.MediaJSON, codec.MediaYAML, codec.MediaProtobuf}
	}
	return acceptedTypes
}

// choose negotiates the representation of a body whose kind and resource
// are known (before it is read: a 406 costs no storage read).
func (p *payload) choose(r *http.Request) (codec.Choice, error) {
	c, ok := codec.Choose(r.Header.Get("Accept"), func(c codec.Choice) bool { return p.allows(c, false) })
	if !ok {
		return c, meta.NewNotAcceptable(p.formats())
	}
	return c, nil
}

// writeRaw writes a JSON body (an object, a list, a Status or any other
// document) in the representation the request asks for.
func (s *Server) writeRaw(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	var p *payload
	classified := func() *payload {
		if p == nil {
			c := s.classify(r, body)
			p = &c
		}
		return p
	}
	c, ok := codec.Choose(r.Header.Get("Accept"), func(c codec.Choice) bool {
		if c.As == "" && c.Format != codec.FormatProtobuf {
			return true // every body has JSON and YAML: no need to look
		}
		return classified().allows(c, false)
	})
	if !ok {
		if strings.HasSuffix(r.URL.Path, "/version") && classified().kind == bodyOther {
			// /version is JSON whatever the client asked, as
			// kube-apiserver's: client-go reads it with the Accept header
			// of its typed clients, protobuf only if so configured.
			s.writeEncoded(w, r, code, codec.Choice{Format: codec.FormatJSON}, *p, false)
			return
		}
		s.writeError(w, r, meta.NewNotAcceptable(classified().formats()))
		return
	}
	if c.As == "" && c.Format != codec.FormatProtobuf {
		s.writeEncoded(w, r, code, c, payload{kind: bodyOther, json: body}, false)
		return
	}
	s.writeEncoded(w, r, code, c, *classified(), false)
}

// writeObject encodes v as JSON and writes it in the negotiated
// representation.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, meta.NewInternalError(err))
		return
	}
	s.writeRaw(w, r, code, body)
}

// writeError writes err as a Status. Errors that are no StatusError are
// logged and answered with a 500. The Status is negotiated like any body
// (JSON, YAML or protobuf, never converted); when the client accepts none of
// them it is written as JSON with its own code, as kube-apiserver does.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	se, ok := meta.AsStatusError(err)
	if !ok {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			se = meta.NewRequestEntityTooLarge("the request body is too large")
		} else {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			se = meta.NewInternalError(err)
		}
	}
	for _, warning := range se.Warnings {
		addWarning(w, warning)
	}
	if se.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(se.RetryAfter))
	}
	body, _ := json.Marshal(se.Status)
	p := payload{kind: bodyStatus, json: body}
	c, ok := codec.Choose(r.Header.Get("Accept"), func(c codec.Choice) bool { return p.allows(c, true) })
	if !ok {
		c = codec.Choice{Format: codec.FormatJSON}
	}
	s.writeEncoded(w, r, se.Code(), c, p, true)
}

// writeEncoded converts and encodes p as c asks and writes it.
func (s *Server) writeEncoded(w http.ResponseWriter, r *http.Request, code int, c codec.Choice, p payload, isError bool) {
	chunks, err := s.encode(r, c, &p)
	if err != nil {
		if isError {
			// Encoding a Status cannot fail on its own data; be safe.
			chunks, c = [][]byte{p.json}, codec.Choice{Format: codec.FormatJSON}
		} else {
			s.writeError(w, r, err)
			return
		}
	}
	if c.Format == codec.FormatJSON && wantPretty(r, c) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, bytes.Join(chunks, nil), "", "  "); err == nil {
			buf.WriteByte('\n')
			chunks = [][]byte{buf.Bytes()}
		}
	}
	h := w.Header()
	h.Set("Content-Type", c.Format.MediaType())
	h.Set("X-Content-Type-Options", "nosniff")
	if _, ok := h["Date"]; !ok {
		h["Date"] = s.date.value(time.Now())
	}
	writeChunks(w, r, code, chunks)
}

// dateHeader is a response's Date header, formatted as net/http does
// (http.TimeFormat, to the second) once a second instead of once per
// response. The zero dateHeader is ready; it is safe for concurrent use.
//
// The responses of one second share the value's slice. net/http only reads
// it, and an Add or a Set replaces it; a middleware that wrote into
// w.Header()["Date"][0] would change it for the others (docs/embedding.md).
type dateHeader struct {
	last atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	v   []string // len == cap: an Add to the header copies it
}

// value returns the header's value for t. Callers must not modify it.
func (d *dateHeader) value(t time.Time) []string {
	sec := t.Unix()
	if p := d.last.Load(); p != nil && p.sec == sec {
		return p.v
	}
	p := &dateValue{sec: sec, v: []string{time.Unix(sec, 0).UTC().Format(http.TimeFormat)}}
	d.last.Store(p)
	return p.v
}

// writeChunks writes a body made of chunks, gzip-compressed when it is large
// and the client accepts gzip.
func writeChunks(w http.ResponseWriter, r *http.Request, code int, chunks [][]byte) {
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	h := w.Header()
	if size >= gzipThreshold && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		h.Del("Content-Length")
		w.WriteHeader(code)
		// A gzip writer holds about a megabyte of compressor state: pooled
		// (liststream.go).
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(w)
		defer func() {
			zw.Reset(io.Discard)
			gzipPool.Put(zw)
		}()
		for _, c := range chunks {
			if _, err := zw.Write(c); err != nil {
				return
			}
		}
		_ = zw.Close()
		return
	}
	h.Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(code)
	if len(chunks) > 2 && size > 32<<10 {
		// Many small chunks (a page of a list): gathered into writes of
		// 32 KiB, each a few TLS records and system calls, instead of one
		// or two of each per item.
		bw := bufioPool.Get().(*bufio.Writer)
		bw.Reset(w)
		defer func() {
			bw.Reset(nil)
			bufioPool.Put(bw)
		}()
		for _, c := range chunks {
			if _, err := bw.Write(c); err != nil {
				return
			}
		}
		_ = bw.Flush()
		return
	}
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			return
		}
	}
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a non-zero q-value.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}

// wantPretty says whether JSON is indented: the pretty query parameter when
// given, else the media type parameter pretty=1, else for command-line tools
// and browsers, as kube-apiserver.
func wantPretty(r *http.Request, c codec.Choice) bool {
	if r.URL != nil && strings.Contains(r.URL.RawQuery, "pretty") {
		if v := queryOf(r).Get("pretty"); v != "" {
			b, _ := strconv.ParseBool(v)
			return b
		}
	}
	if c.Pretty {
		return true
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// encode converts p as c asks (Table, PartialObjectMetadata) and encodes it
// in c's format. The result is a list of chunks so that large lists are
// written without being copied into one buffer.
func (s *Server) encode(r *http.Request, c codec.Choice, p *payload) ([][]byte, error) {
	if c.As != "" && p.kind != bodyStatus {
		return s.encodeConverted(r, c, p)
	}
	if p.kind == bodyList && p.json == nil && c.Format != codec.FormatProtobuf {
		chunks := listJSONChunks(p.res, p.items, p.listMeta)
		if c.Format == codec.FormatJSON {
			return chunks, nil
		}
		p.json = bytes.Join(chunks, nil)
	}
	switch c.Format {
	case codec.FormatYAML:
		y, err := codec.JSONToYAML(p.json)
		if err != nil {
			return nil, meta.NewInternalError(fmt.Errorf("encoding YAML: %w", err))
		}
		return [][]byte{y}, nil
	case codec.FormatProtobuf:
		return encodeProtobuf(p, s.pbCache)
	}
	return [][]byte{p.json}, nil
}

// encodeProtobuf encodes a Status, Scale, object or list in the Kubernetes
// envelope.
func encodeProtobuf(p *payload, cache *codec.ProtobufCache) ([][]byte, error) {
	var (
		msg              *codec.Message
		apiVersion, kind string
	)
	switch p.kind {
	case bodyStatus:
		msg, apiVersion, kind = codec.StatusMessage, "v1", "Status"
	case bodyScale:
		msg, apiVersion, kind = codec.ScaleMessage, "autoscaling/v1", "Scale"
	case bodyObject:
		msg, apiVersion, kind = p.res.Protobuf, p.res.APIVersion(), p.res.Kind
	case bodyList:
		var t codec.Transcoder
		msg := p.res.Protobuf
		return protobufList(p.res.APIVersion(), p.res.ListKind, 1, 2, p.listMeta, p.items, func(dst, item []byte) ([]byte, error) {
			return cache.AppendProtobuf(&t, dst, msg, item)
		})
	default:
		return nil, meta.NewNotAcceptable(acceptedTypes)
	}
	if p.kind != bodyObject {
		cache = nil // statuses and scales are made per request: nothing to reuse
	}
	var t codec.Transcoder
	raw, err := cache.AppendProtobuf(&t, nil, msg, p.json)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("encoding %s as protobuf: %w", kind, err))
	}
	return [][]byte{codec.EncodeEnvelope(apiVersion, kind, raw)}, nil
}

// listJSONChunks lays out a list as JSON around its items, which are not
// copied.
func listJSONChunks(res *registry.Resource, items [][]byte, lm meta.ListMeta) [][]byte {
	head := make([]byte, 0, 128)
	head = append(head, `{"kind":`...)
	head = appendQuotedJSON(head, res.ListKind)
	head = append(head, `,"apiVersion":`...)
	head = appendQuotedJSON(head, res.APIVersion())
	head = append(head, `,"metadata":`...)
	lmb, _ := json.Marshal(lm)
	head = append(head, lmb...)
	head = append(head, `,"items":[`...)
	chunks := make([][]byte, 0, 2*len(items)+2)
	chunks = append(chunks, head)
	comma := []byte{','}
	for i, it := range items {
		if i > 0 {
			chunks = append(chunks, comma)
		}
		chunks = append(chunks, it)
	}
	return append(chunks, []byte("]}"))
}

func appendQuotedJSON(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// addWarning adds one Warning header in the format Kubernetes uses.
func addWarning(w http.ResponseWriter, text string) {
	w.Header().Add("Warning", `299 - `+strconv.Quote(text))
}
