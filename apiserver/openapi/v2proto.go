package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/codec"
)

// /openapi/v2 in protobuf: the Swagger 2.0 document as the gnostic
// openapi_v2.Document message (github.com/google/gnostic-models,
// openapiv2/OpenAPIv2.proto), which client-go's discovery OpenAPISchema()
// asks for and kubectl falls back to for client-side validation.
//
// kube-apiserver (k8s.io/kube-openapi/pkg/handler) produces it with
// openapi_v2.ParseDocument(json) and proto.Marshal. kapi encodes the same
// JSON document by hand with protowire, following gnostic's conversion rule
// for rule: every object of the document is a message whose fields are named
// by their JSON key, "x-" keys are NamedAny vendor extensions whose Any
// holds the value as YAML (gnostic's compiler.Marshal: the value parsed as
// YAML, styles cleared, marshalled), maps (definitions, properties, paths,
// responses) are repeated Named* pairs in document order, and the oneof
// wrappers (ParametersItem, Parameter, NonBodyParameter, ResponseValue,
// SchemaItem, AdditionalPropertiesItem, ItemsItem, TypeItem,
// SecurityDefinitionsItem) pick their branch as gnostic does. Fields are
// written in field-number order, as proto.Marshal does. Keywords Swagger 2.0
// has no field for (OpenAPI v3's nullable, oneOf, anyOf, not) are left out
// where gnostic would refuse the whole document. The examples/e2e tests
// compare the result with gnostic's own parse of the JSON document: equal
// messages, and the same bytes as proto.Marshal.
//
// Why not import gnostic-models: its generated parser and descriptors would
// be linked into every program embedding kapi for one document, it parses
// through a full YAML node tree (slower than this encoder), and it refuses
// the whole document over one v3-only keyword.

// encodeV2Protobuf encodes a Swagger 2.0 JSON document as an
// openapi_v2.Document message.
func encodeV2Protobuf(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi v2: the document is not an object")
	}
	e := &v2Encoder{yaml: map[string]string{}}
	return e.message(make([]byte, 0, len(doc)), pbDocument, obj), nil
}

// pbKind is how a JSON value becomes a protobuf field.
type pbKind uint8

const (
	pbString   pbKind = iota + 1 // a JSON string
	pbBool                       // a JSON boolean
	pbDouble                     // a JSON number, double
	pbInt64                      // a JSON number, int64
	pbStrings                    // a JSON array of strings, repeated string
	pbAny                        // any JSON value, Any{yaml = 2}
	pbAnys                       // a JSON array, repeated Any
	pbMessage                    // a nested message
	pbMessages                   // a JSON array, repeated message
	pbExt                        // the "x-" keys of an object, repeated NamedAny
	pbNamed                      // the other keys of an object, repeated Named* {name = 1, value = 2}
)

// pbField maps a JSON key (or, for pbExt and pbNamed, a set of keys) to a
// field.
type pbField struct {
	key  string
	num  protowire.Number
	kind pbKind
	msg  *pbMsg   // pbMessage, pbMessages
	val  *pbField // pbNamed: the value field of the pair (number 2)
}

// pbMsg describes a message: fields in number order, or a custom encoder
// for the oneof wrappers and the messages that are not JSON objects.
type pbMsg struct {
	fields []pbField
	custom func(e *v2Encoder, dst []byte, v any) []byte
}

func pbNew(fields ...pbField) *pbMsg {
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].num < fields[j].num })
	return &pbMsg{fields: fields}
}

func fStr(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbString}
}
func fBool(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbBool}
}
func fDouble(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbDouble}
}
func fInt64(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbInt64}
}
func fStrs(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbStrings}
}
func fAny(key string, num protowire.Number) pbField { return pbField{key: key, num: num, kind: pbAny} }
func fAnys(key string, num protowire.Number) pbField {
	return pbField{key: key, num: num, kind: pbAnys}
}
func fMsg(key string, num protowire.Number, m *pbMsg) pbField {
	return pbField{key: key, num: num, kind: pbMessage, msg: m}
}
func fMsgs(key string, num protowire.Number, m *pbMsg) pbField {
	return pbField{key: key, num: num, kind: pbMessages, msg: m}
}
func fExt(num protowire.Number) pbField { return pbField{num: num, kind: pbExt} }
func fNamed(num protowire.Number, val pbField) pbField {
	val.num = 2
	return pbField{num: num, kind: pbNamed, val: &val}
}

// The messages of OpenAPIv2.proto (gnostic-models v0.7.0); field numbers as
// there.
var (
	pbDocument, pbSchema, pbPrimitivesItems, pbParameter *pbMsg

	pbExternalDocs = pbNew(fStr("description", 1), fStr("url", 2), fExt(3))
	pbContact      = pbNew(fStr("name", 1), fStr("url", 2), fStr("email", 3), fExt(4))
	pbLicense      = pbNew(fStr("name", 1), fStr("url", 2), fExt(3))
	pbInfo         = pbNew(fStr("title", 1), fStr("version", 2), fStr("description", 3), fStr("termsOfService", 4),
		fMsg("contact", 5, pbContact), fMsg("license", 6, pbLicense), fExt(7))
	pbTag           = pbNew(fStr("name", 1), fStr("description", 2), fMsg("externalDocs", 3, pbExternalDocs), fExt(4))
	pbJSONReference = pbNew(fStr("$ref", 1), fStr("description", 2))
	pbXML           = pbNew(fStr("name", 1), fStr("namespace", 2), fStr("prefix", 3), fBool("attribute", 4), fBool("wrapped", 5), fExt(6))
	pbFileSchema    = pbNew(fStr("format", 1), fStr("title", 2), fStr("description", 3), fAny("default", 4), fStrs("required", 5),
		fStr("type", 6), fBool("readOnly", 7), fMsg("externalDocs", 8, pbExternalDocs), fAny("example", 9), fExt(10))
	pbStringArray   = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte { return e.field(dst, fStrs("", 1), v) }}
	pbSecurityReq   = pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbStringArray}))
	pbOauth2Scopes  = pbNew(fNamed(1, pbField{kind: pbString}))
	pbBasicSecurity = pbNew(fStr("type", 1), fStr("description", 2), fExt(3))
	pbAPIKey        = pbNew(fStr("type", 1), fStr("name", 2), fStr("in", 3), fStr("description", 4), fExt(5))
	pbOauth2Impl    = pbNew(fStr("type", 1), fStr("flow", 2), fMsg("scopes", 3, pbOauth2Scopes), fStr("authorizationUrl", 4), fStr("description", 5), fExt(6))
	pbOauth2Pass    = pbNew(fStr("type", 1), fStr("flow", 2), fMsg("scopes", 3, pbOauth2Scopes), fStr("tokenUrl", 4), fStr("description", 5), fExt(6))
	pbOauth2App     = pbNew(fStr("type", 1), fStr("flow", 2), fMsg("scopes", 3, pbOauth2Scopes), fStr("tokenUrl", 4), fStr("description", 5), fExt(6))
	pbOauth2Code    = pbNew(fStr("type", 1), fStr("flow", 2), fMsg("scopes", 3, pbOauth2Scopes), fStr("authorizationUrl", 4), fStr("tokenUrl", 5),
		fStr("description", 6), fExt(7))
	// SecurityDefinitionsItem: basic 1, apiKey 2, oauth2 implicit 3,
	// password 4, application 5, accessCode 6.
	pbSecurityDefItem = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		m, _ := v.(map[string]any)
		typ, _ := m["type"].(string)
		flow, _ := m["flow"].(string)
		switch {
		case typ == "basic":
			return e.field(dst, fMsg("", 1, pbBasicSecurity), v)
		case typ == "apiKey":
			return e.field(dst, fMsg("", 2, pbAPIKey), v)
		case typ == "oauth2" && flow == "implicit":
			return e.field(dst, fMsg("", 3, pbOauth2Impl), v)
		case typ == "oauth2" && flow == "password":
			return e.field(dst, fMsg("", 4, pbOauth2Pass), v)
		case typ == "oauth2" && flow == "application":
			return e.field(dst, fMsg("", 5, pbOauth2App), v)
		case typ == "oauth2" && flow == "accessCode":
			return e.field(dst, fMsg("", 6, pbOauth2Code), v)
		}
		return dst
	}}
	pbSecurityDefs = pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbSecurityDefItem}))

	// AdditionalPropertiesItem: schema 1 or boolean 2.
	pbAdditionalProperties = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		if b, ok := v.(bool); ok {
			dst = protowire.AppendTag(dst, 2, protowire.VarintType)
			return protowire.AppendVarint(dst, protowire.EncodeBool(b))
		}
		return e.field(dst, fMsg("", 1, pbSchema), v)
	}}
	// TypeItem: repeated string value = 1, from a string or an array.
	pbTypeItem = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		if s, ok := v.(string); ok {
			v = []any{s}
		}
		return e.field(dst, fStrs("", 1), v)
	}}
	// ItemsItem: repeated Schema schema = 1, from a schema or an array.
	pbItemsItem = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		if _, ok := v.([]any); !ok {
			v = []any{v}
		}
		return e.field(dst, fMsgs("", 1, pbSchema), v)
	}}
	pbProperties  = &pbMsg{}
	pbDefinitions = &pbMsg{}

	// PrimitivesItems and Header share fields 1-17.
	primitiveFields = func(first protowire.Number) []pbField {
		return []pbField{fStr("type", first), fStr("format", first+1), {key: "items", num: first + 2, kind: pbMessage},
			fStr("collectionFormat", first+3), fAny("default", first+4), fDouble("maximum", first+5), fBool("exclusiveMaximum", first+6),
			fDouble("minimum", first+7), fBool("exclusiveMinimum", first+8), fInt64("maxLength", first+9), fInt64("minLength", first+10),
			fStr("pattern", first+11), fInt64("maxItems", first+12), fInt64("minItems", first+13), fBool("uniqueItems", first+14),
			fAnys("enum", first+15), fDouble("multipleOf", first+16)}
	}
	pbHeader  = &pbMsg{}
	pbHeaders = pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbHeader}))

	// Header and path parameters: required 1, in 2, description 3, name 4,
	// then the primitive fields from 5, vendor extensions 22. Query and
	// formData parameters have allowEmptyValue 5, the primitive fields from
	// 6 and vendor extensions 23.
	pbHeaderParam   = &pbMsg{}
	pbPathParam     = &pbMsg{}
	pbQueryParam    = &pbMsg{}
	pbFormDataParam = &pbMsg{}
	// NonBodyParameter: header 1, formData 2, query 3, path 4 (by "in").
	pbNonBodyParam = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		m, _ := v.(map[string]any)
		switch in, _ := m["in"].(string); in {
		case "header":
			return e.field(dst, fMsg("", 1, pbHeaderParam), v)
		case "formData":
			return e.field(dst, fMsg("", 2, pbFormDataParam), v)
		case "query":
			return e.field(dst, fMsg("", 3, pbQueryParam), v)
		case "path":
			return e.field(dst, fMsg("", 4, pbPathParam), v)
		}
		return dst
	}}
	pbBodyParam = &pbMsg{}
	// ParametersItem: parameter 1, or a JSON reference 2.
	pbParametersItem = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		m, _ := v.(map[string]any)
		if _, ref := m["$ref"]; ref {
			if _, in := m["in"]; !in {
				return e.field(dst, fMsg("", 2, pbJSONReference), v)
			}
		}
		return e.field(dst, fMsg("", 1, pbParameter), v)
	}}
	pbParameterDefs = &pbMsg{}

	pbExamples   = pbNew(fNamed(1, pbField{kind: pbAny}))
	pbSchemaItem = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		// gnostic takes an object whose type is "file" as a FileSchema.
		if m, _ := v.(map[string]any); m != nil && m["type"] == "file" {
			return e.field(dst, fMsg("", 2, pbFileSchema), v)
		}
		return e.field(dst, fMsg("", 1, pbSchema), v)
	}}
	pbResponse = pbNew(fStr("description", 1), fMsg("schema", 2, pbSchemaItem), fMsg("headers", 3, pbHeaders),
		fMsg("examples", 4, pbExamples), fExt(5))
	// ResponseValue: response 1, or a JSON reference 2.
	pbResponseValue = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		if m, _ := v.(map[string]any); m != nil {
			if _, ref := m["$ref"]; ref {
				return e.field(dst, fMsg("", 2, pbJSONReference), v)
			}
		}
		return e.field(dst, fMsg("", 1, pbResponse), v)
	}}
	pbResponses    = pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbResponseValue}), fExt(2))
	pbResponseDefs = pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbResponse}))
	pbSecurityReqs = func(key string, num protowire.Number) pbField { return fMsgs(key, num, pbSecurityReq) }
	pbOperation    = pbNew(fStrs("tags", 1), fStr("summary", 2), fStr("description", 3), fMsg("externalDocs", 4, pbExternalDocs),
		fStr("operationId", 5), fStrs("produces", 6), fStrs("consumes", 7), fMsgs("parameters", 8, pbParametersItem),
		fMsg("responses", 9, pbResponses), fStrs("schemes", 10), fBool("deprecated", 11), pbSecurityReqs("security", 12), fExt(13))
	pbPathItem = pbNew(fStr("$ref", 1), fMsg("get", 2, pbOperation), fMsg("put", 3, pbOperation), fMsg("post", 4, pbOperation),
		fMsg("delete", 5, pbOperation), fMsg("options", 6, pbOperation), fMsg("head", 7, pbOperation), fMsg("patch", 8, pbOperation),
		fMsgs("parameters", 9, pbParametersItem), fExt(10))
	pbPaths = pbNew(fExt(1), fNamed(2, pbField{kind: pbMessage, msg: pbPathItem}))
)

func init() {
	pbSchema = pbNew(fStr("$ref", 1), fStr("format", 2), fStr("title", 3), fStr("description", 4), fAny("default", 5),
		fDouble("multipleOf", 6), fDouble("maximum", 7), fBool("exclusiveMaximum", 8), fDouble("minimum", 9),
		fBool("exclusiveMinimum", 10), fInt64("maxLength", 11), fInt64("minLength", 12), fStr("pattern", 13),
		fInt64("maxItems", 14), fInt64("minItems", 15), fBool("uniqueItems", 16), fInt64("maxProperties", 17),
		fInt64("minProperties", 18), fStrs("required", 19), fAnys("enum", 20), fMsg("additionalProperties", 21, pbAdditionalProperties),
		fMsg("type", 22, pbTypeItem), fMsg("items", 23, pbItemsItem), fMsgs("allOf", 24, nil), fMsg("properties", 25, pbProperties),
		fStr("discriminator", 26), fBool("readOnly", 27), fMsg("xml", 28, pbXML), fMsg("externalDocs", 29, pbExternalDocs),
		fAny("example", 30), fExt(31))
	for i := range pbSchema.fields {
		if pbSchema.fields[i].key == "allOf" {
			pbSchema.fields[i].msg = pbSchema
		}
	}
	*pbProperties = *pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbSchema}))
	*pbDefinitions = *pbProperties

	pbPrimitivesItems = pbNew(append(primitiveFields(1), fExt(18))...)
	pbPrimitivesItems.fields[2].msg = pbPrimitivesItems
	*pbHeader = *pbNew(append(primitiveFields(1), fStr("description", 18), fExt(19))...)
	pbHeader.fields[2].msg = pbPrimitivesItems

	param := func(m *pbMsg, query bool) {
		fields := []pbField{fBool("required", 1), fStr("in", 2), fStr("description", 3), fStr("name", 4)}
		first := protowire.Number(5)
		if query {
			fields = append(fields, fBool("allowEmptyValue", 5))
			first = 6
		}
		prim := primitiveFields(first)
		prim[2].msg = pbPrimitivesItems
		*m = *pbNew(append(append(fields, prim...), fExt(first+17))...)
	}
	param(pbHeaderParam, false)
	param(pbPathParam, false)
	param(pbQueryParam, true)
	param(pbFormDataParam, true)
	*pbBodyParam = *pbNew(fStr("description", 1), fStr("name", 2), fStr("in", 3), fBool("required", 4), fMsg("schema", 5, pbSchema), fExt(6))

	// Parameter: body 1 (in: body), else a non-body parameter 2.
	pbParameter = &pbMsg{custom: func(e *v2Encoder, dst []byte, v any) []byte {
		if m, _ := v.(map[string]any); m != nil && m["in"] == "body" {
			return e.field(dst, fMsg("", 1, pbBodyParam), v)
		}
		return e.field(dst, fMsg("", 2, pbNonBodyParam), v)
	}}
	*pbParameterDefs = *pbNew(fNamed(1, pbField{kind: pbMessage, msg: pbParameter}))

	pbDocument = pbNew(fStr("swagger", 1), fMsg("info", 2, pbInfo), fStr("host", 3), fStr("basePath", 4), fStrs("schemes", 5),
		fStrs("consumes", 6), fStrs("produces", 7), fMsg("paths", 8, pbPaths), fMsg("definitions", 9, pbDefinitions),
		fMsg("parameters", 10, pbParameterDefs), fMsg("responses", 11, pbResponseDefs), pbSecurityReqs("security", 12),
		fMsg("securityDefinitions", 13, pbSecurityDefs), fMsgs("tags", 14, pbTag), fMsg("externalDocs", 15, pbExternalDocs), fExt(16))
}

// v2Encoder encodes one document; yaml memoizes the YAML of Any values
// (the same x-kubernetes-group-version-kind recurs on every operation).
type v2Encoder struct {
	yaml map[string]string
}

// message appends the fields of m read from v (without tag or length).
func (e *v2Encoder) message(dst []byte, m *pbMsg, v any) []byte {
	if m.custom != nil {
		return m.custom(e, dst, v)
	}
	obj, _ := v.(map[string]any)
	var keys []string // sorted: the order of the JSON document (json.Marshal sorts keys)
	for _, f := range m.fields {
		switch f.kind {
		case pbExt, pbNamed:
			if keys == nil {
				keys = make([]string, 0, len(obj))
				for k := range obj {
					keys = append(keys, k)
				}
				sort.Strings(keys)
			}
			hasExt := f.kind == pbNamed && m.hasExt()
			for _, k := range keys {
				isExt := strings.HasPrefix(k, "x-")
				switch {
				case f.kind == pbExt && isExt:
					dst = e.namedPair(dst, f.num, k, pbField{num: 2, kind: pbAny}, obj[k])
				case f.kind == pbNamed && !(hasExt && isExt):
					dst = e.namedPair(dst, f.num, k, *f.val, obj[k])
				}
			}
		default:
			if val, ok := obj[f.key]; ok {
				dst = e.field(dst, f, val)
			}
		}
	}
	return dst
}

func (m *pbMsg) hasExt() bool {
	for _, f := range m.fields {
		if f.kind == pbExt {
			return true
		}
	}
	return false
}

// namedPair appends a Named* message {name = 1, value = 2} as field num.
func (e *v2Encoder) namedPair(dst []byte, num protowire.Number, name string, val pbField, v any) []byte {
	dst, start := codec.BeginEmbedded(dst, num)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, name)
	dst = e.field(dst, val, v)
	return codec.EndEmbedded(dst, start)
}

// field appends field f with the JSON value v. Values of the wrong JSON
// type and zero scalars (proto3 leaves them out) are skipped; a present
// message is written even when empty.
func (e *v2Encoder) field(dst []byte, f pbField, v any) []byte {
	switch f.kind {
	case pbString:
		if s, ok := v.(string); ok && s != "" {
			dst = protowire.AppendTag(dst, f.num, protowire.BytesType)
			dst = protowire.AppendString(dst, s)
		}
	case pbBool:
		if b, ok := v.(bool); ok && b {
			dst = protowire.AppendTag(dst, f.num, protowire.VarintType)
			dst = protowire.AppendVarint(dst, 1)
		}
	case pbDouble:
		if n, ok := v.(json.Number); ok {
			if x, err := n.Float64(); err == nil && x != 0 {
				dst = protowire.AppendTag(dst, f.num, protowire.Fixed64Type)
				dst = protowire.AppendFixed64(dst, math.Float64bits(x))
			}
		}
	case pbInt64:
		if n, ok := v.(json.Number); ok {
			x, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				fl, ferr := n.Float64()
				x, err = int64(fl), ferr
			}
			if err == nil && x != 0 {
				dst = protowire.AppendTag(dst, f.num, protowire.VarintType)
				dst = protowire.AppendVarint(dst, uint64(x))
			}
		}
	case pbStrings:
		a, _ := v.([]any)
		for _, item := range a {
			if s, ok := item.(string); ok {
				dst = protowire.AppendTag(dst, f.num, protowire.BytesType)
				dst = protowire.AppendString(dst, s)
			}
		}
	case pbAny:
		var start int
		dst, start = codec.BeginEmbedded(dst, f.num)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, e.yamlOf(v))
		dst = codec.EndEmbedded(dst, start)
	case pbAnys:
		a, _ := v.([]any)
		for _, item := range a {
			dst = e.field(dst, pbField{num: f.num, kind: pbAny}, item)
		}
	case pbMessage:
		if v == nil {
			return dst
		}
		if _, isObj := v.(map[string]any); !isObj && f.msg.custom == nil {
			return dst
		}
		var start int
		dst, start = codec.BeginEmbedded(dst, f.num)
		dst = e.message(dst, f.msg, v)
		dst = codec.EndEmbedded(dst, start)
	case pbMessages:
		a, _ := v.([]any)
		for _, item := range a {
			dst = e.field(dst, pbField{num: f.num, kind: pbMessage, msg: f.msg}, item)
		}
	}
	return dst
}

// yamlOf renders a JSON value as gnostic's Any.yaml: the value's JSON text
// parsed as YAML, every node's style cleared, marshalled.
func (e *v2Encoder) yamlOf(v any) string {
	js, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	if s, ok := e.yaml[string(js)]; ok {
		return s
	}
	s := string(js)
	var doc yaml.Node
	if err := yaml.Unmarshal(js, &doc); err == nil && doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root := doc.Content[0]
		clearYAMLStyle(root)
		if out, err := yaml.Marshal(root); err == nil {
			s = string(out)
		}
	}
	e.yaml[string(js)] = s
	return s
}

func clearYAMLStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearYAMLStyle(c)
	}
}
