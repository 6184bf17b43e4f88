package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/watch"
)

// Watch streams in every representation: newline-delimited JSON events, or
// length-prefixed protobuf WatchEvent frames, each event's object as the
// type itself, a PartialObjectMetadata or a one-row Table. The encoders
// below are watch.Encoders; all but the Table one are comparable values, so
// an event is encoded once per representation and the frame shared by every
// watcher that uses it.

// watchEncoder negotiates the representation of a watch of res and returns
// its encoder and the Content-Type of the stream. Like kube-apiserver it
// answers 406 when the Accept header allows only YAML (there is no YAML
// stream) or a PartialObjectMetadataList.
func (s *Server) watchEncoder(r *http.Request, res *registry.Resource) (watch.Encoder, string, error) {
	p := payload{kind: bodyObject, res: res}
	c, err := p.choose(r)
	if err != nil {
		return nil, "", err
	}
	streamType := codec.MediaJSON
	if c.Format == codec.FormatProtobuf {
		streamType = codec.MediaProtobuf + ";stream=watch"
	}
	switch {
	case c.Format == codec.FormatYAML:
		types := []string{codec.MediaJSON + ";stream=watch"}
		if res.Protobuf != nil {
			types = append(types, codec.MediaProtobuf+";stream=watch")
		}
		return nil, "", meta.NewNotAcceptable(types)
	case c.As == codec.AsPartialObjectMetadataList:
		return nil, "", notAcceptable("you requested PartialObjectMetadataList, but a watch streams single objects: request PartialObjectMetadata")
	case c.As == codec.AsTable:
		include, err := tableInclude(r)
		if err != nil {
			return nil, "", err
		}
		if _, err := newTableBuilder(res, c.Version, include, time.Time{}); err != nil {
			return nil, "", err
		}
		return &tableWatchEncoder{rows: tableRows{res: res, version: c.Version, include: include}}, streamType, nil
	case c.As == codec.AsPartialObjectMetadata:
		return metadataWatchEncoder{kind: res.Kind, apiVersion: res.APIVersion(), version: c.Version, protobuf: c.Format == codec.FormatProtobuf}, streamType, nil
	case c.Format == codec.FormatProtobuf:
		return protobufWatchEncoder{res: res}, streamType, nil
	}
	return jsonWatchEncoder{kind: res.Kind, apiVersion: res.APIVersion()}, streamType, nil
}

// bookmarkJSON is the object of a BOOKMARK event: the watched kind with only
// its resourceVersion (and the annotation that ends the initial events).
func bookmarkJSON(kind, apiVersion string, rev int64, initialEventsEnd bool) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"kind":`...)
	b = appendQuotedJSON(b, kind)
	b = append(b, `,"apiVersion":`...)
	b = appendQuotedJSON(b, apiVersion)
	b = append(b, `,"metadata":{"resourceVersion":"`...)
	b = strconv.AppendInt(b, rev, 10)
	b = append(b, '"')
	if initialEventsEnd {
		b = append(b, `,"annotations":{"k8s.io/initial-events-end":"true"}`...)
	}
	return append(b, "}}"...)
}

// statusJSON is the Status of a watch error.
func statusJSON(err error) []byte {
	se, ok := meta.AsStatusError(err)
	if !ok {
		se = meta.NewInternalError(err)
	}
	b, _ := json.Marshal(se.Status)
	return b
}

// appendProtobufStatusEvent appends an ERROR frame holding a Status.
func appendProtobufStatusEvent(dst []byte, err error) []byte {
	raw, perr := codec.StatusMessage.AppendProtobuf(nil, statusJSON(err))
	if perr != nil {
		raw = nil
	}
	return codec.AppendProtobufWatchEvent(dst, "ERROR", codec.EncodeEnvelope("v1", "Status", raw))
}

// jsonWatchEncoder encodes watch events as kube-apiserver's JSON stream: one
// {"type":...,"object":...} document per line. It is a comparable value, so
// that frames are shared by every JSON watcher of a type.
type jsonWatchEncoder struct {
	kind, apiVersion string
}

func (e jsonWatchEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	n := len(dst)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ.String()...)
	dst = append(dst, `","object":`...)
	dst, err := registry.AppendObjectJSON(dst, obj.Value, rev)
	if err != nil {
		return dst[:n], err
	}
	return append(dst, "}\n"...), nil
}

func (e jsonWatchEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	dst = append(dst, `{"type":"BOOKMARK","object":{"kind":`...)
	dst = codec.AppendJSONString(dst, e.kind)
	dst = append(dst, `,"apiVersion":`...)
	dst = codec.AppendJSONString(dst, e.apiVersion)
	dst = append(dst, `,"metadata":{"resourceVersion":"`...)
	dst = strconv.AppendInt(dst, rev, 10)
	dst = append(dst, '"')
	if initialEventsEnd {
		dst = append(dst, `,"annotations":{"k8s.io/initial-events-end":"true"}`...)
	}
	return append(dst, "}}}\n"...), nil
}

func (e jsonWatchEncoder) AppendError(dst []byte, err error) []byte {
	se, ok := meta.AsStatusError(err)
	if !ok {
		se = meta.NewInternalError(err)
	}
	status, _ := json.Marshal(se.Status)
	dst = append(dst, `{"type":"ERROR","object":`...)
	dst = append(dst, status...)
	return append(dst, "}\n"...)
}

// protobufWatchEncoder writes protobuf frames of the type's own message.
type protobufWatchEncoder struct {
	res *registry.Resource
}

func (e protobufWatchEncoder) frame(dst []byte, typ string, objJSON []byte) ([]byte, error) {
	raw, err := e.res.Protobuf.AppendProtobuf(make([]byte, 0, len(objJSON)), objJSON)
	if err != nil {
		return dst, meta.NewInternalError(fmt.Errorf("encoding %s as protobuf: %w", e.res.Kind, err))
	}
	return codec.AppendProtobufWatchEvent(dst, typ, codec.EncodeEnvelope(e.res.APIVersion(), e.res.Kind, raw)), nil
}

func (e protobufWatchEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	js, err := registry.AppendObjectJSON(nil, obj.Value, rev)
	if err != nil {
		return dst, err
	}
	return e.frame(dst, typ.String(), js)
}

func (e protobufWatchEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	return e.frame(dst, "BOOKMARK", bookmarkJSON(e.res.Kind, e.res.APIVersion(), rev, initialEventsEnd))
}

func (e protobufWatchEncoder) AppendError(dst []byte, err error) []byte {
	return appendProtobufStatusEvent(dst, err)
}

// metadataWatchEncoder writes each event's object as a PartialObjectMetadata,
// in JSON or protobuf (client-go's metadata informers).
type metadataWatchEncoder struct {
	kind, apiVersion string // of the watched type, for bookmarks
	version          string // meta.k8s.io version
	protobuf         bool
}

func (e metadataWatchEncoder) event(dst []byte, typ string, objJSON []byte) ([]byte, error) {
	if !e.protobuf {
		md, err := codec.TopLevelField(objJSON, "metadata")
		if err != nil {
			return dst, meta.NewInternalError(err)
		}
		return codec.AppendJSONWatchEvent(dst, typ, partialObjectMetadataJSON(e.version, md)), nil
	}
	raw, err := codec.PartialObjectMetadataMessage.AppendProtobuf(nil, objJSON)
	if err != nil {
		return dst, meta.NewInternalError(fmt.Errorf("encoding metadata as protobuf: %w", err))
	}
	return codec.AppendProtobufWatchEvent(dst, typ, codec.EncodeEnvelope(codec.MetaGroup+"/"+e.version, codec.AsPartialObjectMetadata, raw)), nil
}

func (e metadataWatchEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	js, err := registry.AppendObjectJSON(nil, obj.Value, rev)
	if err != nil {
		return dst, err
	}
	return e.event(dst, typ.String(), js)
}

func (e metadataWatchEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	return e.event(dst, "BOOKMARK", bookmarkJSON(e.kind, e.apiVersion, rev, initialEventsEnd))
}

func (e metadataWatchEncoder) AppendError(dst []byte, err error) []byte {
	if e.protobuf {
		return appendProtobufStatusEvent(dst, err)
	}
	return codec.AppendJSONWatchEvent(dst, "ERROR", statusJSON(err))
}

// tableWatchEncoder writes each event's object as a one-row Table, with the
// column definitions in the first event only, as kube-apiserver (kubectl get
// --watch). It has per-watch state and is used by one watch; the change
// events after its first frame are tableRows', shared by every Table watch
// of the same type, version and includeObject (watch.RestEncoder).
type tableWatchEncoder struct {
	rows        tableRows
	headersSent atomic.Bool
}

func (e *tableWatchEncoder) event(dst []byte, typ string, objJSON []byte, include string) ([]byte, error) {
	dst, err := e.rows.event(dst, typ, objJSON, include, !e.headersSent.Load())
	if err == nil {
		e.headersSent.Store(true)
	}
	return dst, err
}

// PerWatch marks the encoder as per-watch: its frames are not cached and
// shared (see watch.PerWatchEncoder).
func (e *tableWatchEncoder) PerWatch() {}

// FirstSent reports whether the column definitions went out.
func (e *tableWatchEncoder) FirstSent() bool { return e.headersSent.Load() }

// Rest is the encoder of the rows after the column definitions.
func (e *tableWatchEncoder) Rest() watch.Encoder { return e.rows }

func (e *tableWatchEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	js, err := registry.AppendObjectJSON(nil, obj.Value, rev)
	if err != nil {
		return dst, err
	}
	return e.event(dst, typ.String(), js, e.rows.include)
}

// AppendBookmark sends the bookmark as a Table too; the one that ends the
// initial events keeps its metadata (and annotation) whatever includeObject
// says, as kube-apiserver.
func (e *tableWatchEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	include := e.rows.include
	if initialEventsEnd {
		include = includeMetadata
	}
	return e.event(dst, "BOOKMARK", bookmarkJSON(e.rows.res.Kind, e.rows.res.APIVersion(), rev, initialEventsEnd), include)
}

func (e *tableWatchEncoder) AppendError(dst []byte, err error) []byte {
	return codec.AppendJSONWatchEvent(dst, "ERROR", statusJSON(err))
}

// tableRows writes each event's object as a one-row Table without column
// definitions: the frames of a Table watch after its first, which the watch
// cache encodes once per event for every such watch. Cells that depend on
// the time (an age) are those of when the event was first encoded.
type tableRows struct {
	res              *registry.Resource
	version, include string
}

func (e tableRows) event(dst []byte, typ string, objJSON []byte, include string, headers bool) ([]byte, error) {
	b, err := newTableBuilder(e.res, e.version, include, time.Now())
	if err != nil {
		return dst, err
	}
	t, err := b.build([][]byte{objJSON}, meta.ListMeta{}, true, headers)
	if err != nil {
		return dst, err
	}
	body, err := json.Marshal(t)
	if err != nil {
		return dst, meta.NewInternalError(err)
	}
	return codec.AppendJSONWatchEvent(dst, typ, body), nil
}

func (e tableRows) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	js, err := registry.AppendObjectJSON(nil, obj.Value, rev)
	if err != nil {
		return dst, err
	}
	return e.event(dst, typ.String(), js, e.include, false)
}

func (e tableRows) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	return e.event(dst, "BOOKMARK", bookmarkJSON(e.res.Kind, e.res.APIVersion(), rev, initialEventsEnd), e.include, false)
}

func (e tableRows) AppendError(dst []byte, err error) []byte {
	return codec.AppendJSONWatchEvent(dst, "ERROR", statusJSON(err))
}
