package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// Conversions of a response body to the meta.k8s.io representations a
// client may ask for with as=...;g=meta.k8s.io;v=...: Table (for kubectl
// get), PartialObjectMetadata and PartialObjectMetadataList (client-go's
// metadata client and informers). They read the stored JSON directly: the
// metadata of an object is copied, not decoded.

// encodeConverted converts an object or list body as c asks and encodes it.
func (s *Server) encodeConverted(r *http.Request, c codec.Choice, p *payload) ([][]byte, error) {
	switch c.As {
	case codec.AsTable:
		include, err := tableInclude(r)
		if err != nil {
			return nil, err
		}
		res := p.res
		if p.kind == bodyScale {
			res = scaleTableResource()
		}
		b, err := newTableBuilder(res, c.Version, include, time.Now())
		if err != nil {
			return nil, err
		}
		var t *table
		if p.kind == bodyList {
			t, err = b.build(p.items, p.listMeta, false, true)
		} else {
			t, err = b.build([][]byte{p.json}, meta.ListMeta{}, true, true)
		}
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(t)
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		return encodeJSONAs(c.Format, body)
	case codec.AsPartialObjectMetadata:
		if p.kind == bodyList {
			return nil, metadataOfList(p.res)
		}
		if c.Format == codec.FormatProtobuf {
			b, err := codec.PartialObjectMetadataMessage.AppendProtobuf(nil, p.json)
			if err != nil {
				return nil, meta.NewInternalError(fmt.Errorf("encoding metadata as protobuf: %w", err))
			}
			return [][]byte{codec.EncodeEnvelope(codec.MetaGroup+"/"+c.Version, codec.AsPartialObjectMetadata, b)}, nil
		}
		md, err := codec.TopLevelField(p.json, "metadata")
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		return encodeJSONAs(c.Format, partialObjectMetadataJSON(c.Version, md))
	case codec.AsPartialObjectMetadataList:
		if p.kind != bodyList {
			return nil, notAcceptable(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%s)", p.res.Kind))
		}
		apiVersion := codec.MetaGroup + "/" + c.Version
		if c.Format == codec.FormatProtobuf {
			metaField, itemsField := protowire.Number(1), protowire.Number(2)
			if c.Version == "v1beta1" {
				metaField, itemsField = 2, 1 // meta/v1beta1 numbers them the other way round
			}
			// An item read with the PartialObjectMetadata message is its
			// metadata: one pass, the rest skipped.
			var t codec.Transcoder
			return protobufList(apiVersion, codec.AsPartialObjectMetadataList, metaField, itemsField, p.listMeta, p.items, func(dst, item []byte) ([]byte, error) {
				return t.AppendProtobuf(dst, codec.PartialObjectMetadataMessage, item)
			})
		}
		out := make([]byte, 0, 64+totalLen(p.items))
		out = append(out, `{"kind":"PartialObjectMetadataList","apiVersion":`...)
		out = appendQuotedJSON(out, apiVersion)
		out = append(out, `,"metadata":`...)
		lmb, _ := json.Marshal(p.listMeta)
		out = append(out, lmb...)
		out = append(out, `,"items":[`...)
		for i, it := range p.items {
			md, err := codec.TopLevelField(it, "metadata")
			if err != nil {
				return nil, meta.NewInternalError(err)
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = appendPartialObjectMetadataJSON(out, c.Version, md)
		}
		out = append(out, "]}"...)
		return encodeJSONAs(c.Format, out)
	}
	return nil, notAcceptable(fmt.Sprintf("no conversion to %s", c.As))
}

func notAcceptable(msg string) error {
	se := meta.NewNotAcceptable(nil)
	se.Status.Message = msg
	return se
}

// encodeJSONAs returns a JSON document as JSON or YAML.
func encodeJSONAs(f codec.Format, body []byte) ([][]byte, error) {
	if f == codec.FormatYAML {
		y, err := codec.JSONToYAML(body)
		if err != nil {
			return nil, meta.NewInternalError(fmt.Errorf("encoding YAML: %w", err))
		}
		return [][]byte{y}, nil
	}
	return [][]byte{body}, nil
}

// partialObjectMetadataJSON wraps the raw JSON of an object's metadata as a
// PartialObjectMetadata.
func partialObjectMetadataJSON(version string, md []byte) []byte {
	return appendPartialObjectMetadataJSON(make([]byte, 0, len(md)+80), version, md)
}

func appendPartialObjectMetadataJSON(dst []byte, version string, md []byte) []byte {
	if md == nil {
		md = []byte("{}")
	}
	dst = append(dst, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/`...)
	dst = append(dst, version...)
	dst = append(dst, `","metadata":`...)
	dst = append(dst, md...)
	return append(dst, '}')
}

// protobufList encodes a list in the Kubernetes envelope: ListMeta in
// metaField and each item, as appendItem encodes it, in itemsField. The
// items are encoded into one buffer; the envelope around them is written
// separately, so the list is never copied.
func protobufList(apiVersion, kind string, metaField, itemsField protowire.Number, lm meta.ListMeta, items [][]byte, appendItem func(dst, item []byte) ([]byte, error)) ([][]byte, error) {
	lmb, _ := json.Marshal(lm)
	// Protobuf is smaller than the JSON it comes from: one allocation.
	body, err := codec.AppendEmbedded(make([]byte, 0, 64+totalLen(items)), metaField, func(dst []byte) ([]byte, error) {
		return codec.ListMetaMessage.AppendProtobuf(dst, lmb)
	})
	if err != nil {
		return nil, meta.NewInternalError(err)
	}
	for _, it := range items {
		var start int
		body, start = codec.BeginEmbedded(body, itemsField)
		if body, err = appendItem(body, it); err != nil {
			return nil, meta.NewInternalError(fmt.Errorf("encoding a %s item as protobuf: %w", kind, err))
		}
		body = codec.EndEmbedded(body, start)
	}
	head := codec.AppendEnvelopeHeader(nil, apiVersion, kind, len(body))
	return [][]byte{head, body, codec.AppendEnvelopeTrailer(nil)}, nil
}

// totalLen is the size of items together.
func totalLen(items [][]byte) int {
	n := 0
	for _, it := range items {
		n += len(it)
	}
	return n
}

// metadataOfList is the answer to a list asked for as PartialObjectMetadata
// (singular), as kube-apiserver words it.
func metadataOfList(res *registry.Resource) error {
	return notAcceptable(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%s)", res.ListKind))
}

// scaleTableResource describes an autoscaling/v1 Scale for its Table: the
// columns kube-apiserver prints for it.
func scaleTableResource() *registry.Resource {
	return &registry.Resource{Group: "autoscaling", Version: "v1", Kind: "Scale", PrinterColumns: []registry.Column{
		{Name: "Desired", Type: "integer", Description: "Desired number of replicas.", JSONPath: ".spec.replicas"},
		{Name: "Available", Type: "integer", Description: "Actual number of observed replicas.", JSONPath: ".status.replicas"},
		{Name: "Age", Type: "date", Description: creationTimestampDescription, JSONPath: ".metadata.creationTimestamp"},
	}}
}
