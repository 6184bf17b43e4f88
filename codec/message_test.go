package codec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// configMap is core/v1 ConfigMap, as the registry describes it.
var configMap = MustMessage("ConfigMap",
	Field{Name: "metadata", Number: 1, Kind: MessageKind, Message: ObjectMetaMessage},
	Field{Name: "data", Number: 2, Kind: String, Map: true},
	Field{Name: "binaryData", Number: 3, Kind: Bytes, Map: true},
	Field{Name: "immutable", Number: 4, Kind: Bool, Keep: true},
)

const sampleConfigMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","namespace":"default","uid":"9ce83bb9-1c22-48fb-a031-1897d17b0cfc","resourceVersion":"205","generation":3,
"creationTimestamp":"2026-11-22T00:54:00Z","deletionGracePeriodSeconds":0,"labels":{"a":"b","x.y/z":""},"annotations":{"note":"caf\u00e9 \"quoted\""},
"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"u1","controller":true}],"finalizers":["f1","f2"],
"managedFields":[{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2026-11-22T00:54:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:a":{}}}}]},
"data":{"a":"b","empty":""},"binaryData":{"bin":"AAEC/w=="},"immutable":false,"unknownField":{"deep":[1,2,{"x":null}]}}`

func decodeGeneric(t testing.TB, s string) map[string]any {
	t.Helper()
	v, _, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func TestMessageRoundTrip(t *testing.T) {
	pb, err := configMap.AppendProtobuf(nil, []byte(sampleConfigMap))
	if err != nil {
		t.Fatal(err)
	}
	got, err := configMap.Unmarshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	want := decodeGeneric(t, sampleConfigMap)
	// Not in the message: type meta and unknown fields.
	delete(want, "apiVersion")
	delete(want, "kind")
	delete(want, "unknownField")
	if !reflect.DeepEqual(got, want) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		t.Fatalf("round trip:\n got %s\nwant %s", a, b)
	}
	// Marshal of the generic form gives the same bytes as transcoding the
	// same JSON (map keys sorted on both sides).
	again, err := configMap.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := configMap.Unmarshal(again)
	if err != nil || !reflect.DeepEqual(got2, want) {
		t.Fatalf("second round trip: %v", err)
	}
}

// The first bytes of ObjectMeta match kube-apiserver's encoding of the same
// object (observed: name = 1, namespace = 3, uid = 5, resourceVersion = 6,
// creationTimestamp = 8 as {seconds, nanos}).
func TestObjectMetaWire(t *testing.T) {
	pb, err := ObjectMetaMessage.AppendProtobuf(nil, []byte(`{"name":"cm1","namespace":"default","resourceVersion":"205","creationTimestamp":"2026-11-22T00:54:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = protowire.AppendTag(want, 1, protowire.BytesType)
	want = protowire.AppendString(want, "cm1")
	want = protowire.AppendTag(want, 3, protowire.BytesType)
	want = protowire.AppendString(want, "default")
	want = protowire.AppendTag(want, 6, protowire.BytesType)
	want = protowire.AppendString(want, "205")
	want = protowire.AppendTag(want, 8, protowire.BytesType)
	ts := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1795308840)
	ts = protowire.AppendVarint(protowire.AppendTag(ts, 2, protowire.VarintType), 0)
	want = protowire.AppendBytes(want, ts)
	if !bytes.Equal(pb, want) {
		t.Fatalf("ObjectMeta:\n got %x\nwant %x", pb, want)
	}
}

func TestLongLengthPrefixes(t *testing.T) {
	long := strings.Repeat("x", 70000)
	js := `{"metadata":{"name":"n","annotations":{"big":"` + long + `"}},"data":{"k":"` + long + `"}}`
	pb, err := configMap.AppendProtobuf(nil, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	got, err := configMap.Unmarshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	if got["data"].(map[string]any)["k"] != long || got["metadata"].(map[string]any)["annotations"].(map[string]any)["big"] != long {
		t.Fatal("long values did not survive")
	}
}

func TestTranscodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata":{"name":5}}`, "field metadata.name"},
		{`{"metadata":{"generation":"x"}}`, "field metadata.generation"},
		{`{"metadata":{"generation":1.5}}`, "field metadata.generation"},
		{`{"metadata":{"creationTimestamp":"yesterday"}}`, "must be RFC 3339"},
		{`{"binaryData":{"a":"not base64!"}}`, "illegal base64"},
		{`{"data":["a"]}`, "field data"},
		{`{"metadata":{"labels":{"a":1}}}`, "field metadata.labels.a"},
		{`{"metadata":{"finalizers":[1]}}`, "field metadata.finalizers[0]"},
		{`{"metadata":`, "expected an object"},
		{`{"metadata":{"name":"x"`, "unexpected end"},
		{`{"metadata":{}} x`, "after top-level value"},
		{`[]`, "expected an object"},
		{`{"unknown":[[[[` + strings.Repeat("[", MaxDepth) + `]]]]}`, "max depth"},
	} {
		_, err := configMap.AppendProtobuf(nil, []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AppendProtobuf(%.60q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestUnmarshalErrors(t *testing.T) {
	valid, _ := configMap.AppendProtobuf(nil, []byte(`{"metadata":{"name":"abc","labels":{"a":"b"}},"immutable":true}`))
	for i := 1; i < len(valid); i++ {
		if _, err := configMap.Unmarshal(valid[:i]); err == nil {
			// Cutting at a field boundary is a shorter valid message.
			if _, _, n := protowire.ConsumeField(valid[:i]); n == i {
				continue
			}
		}
	}
	// Wrong wire type for a known field.
	bad := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3)
	if _, err := configMap.Unmarshal(bad); err == nil || !strings.Contains(err.Error(), "wire type") {
		t.Errorf("metadata as varint: %v", err)
	}
	// Truncated length.
	if _, err := configMap.Unmarshal([]byte{0x0a, 0x05, 0x0a}); err == nil {
		t.Error("truncated message accepted")
	}
	// Groups are refused.
	if _, err := configMap.Unmarshal(protowire.AppendTag(nil, 9, protowire.StartGroupType)); err == nil {
		t.Error("group accepted")
	}
	// Invalid JSON in a FieldsV1.
	mf := protowire.AppendTag(nil, 7, protowire.BytesType)
	mf = protowire.AppendBytes(mf, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("{nope")))
	md := protowire.AppendBytes(protowire.AppendTag(nil, 17, protowire.BytesType), mf)
	cm := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), md)
	if _, err := configMap.Unmarshal(cm); err == nil || !strings.Contains(err.Error(), "metadata.managedFields.fieldsV1") {
		t.Errorf("bad fieldsV1: %v", err)
	}
}

func TestKinds(t *testing.T) {
	m := MustMessage("Kinds",
		Field{Name: "q", Number: 1, Kind: Quantity},
		Field{Name: "ios", Number: 2, Kind: IntOrString, Repeated: true},
		Field{Name: "mt", Number: 3, Kind: MicroTime},
		Field{Name: "d", Number: 4, Kind: Double},
		Field{Name: "i32", Number: 5, Kind: Int32, Repeated: true},
		Field{Name: "raw", Number: 6, Kind: RawJSON},
		Field{Name: "b", Number: 7, Kind: Bool, Keep: true},
	)
	in := `{"q":"100m","ios":[8080,"http",-1],"mt":"2026-01-02T03:04:05.123456Z","d":1.5,"i32":[-5,7],"raw":{"a" : [1, "x"]},"b":false}`
	pb, err := m.AppendProtobuf(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Unmarshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(got)
	want := `{"b":false,"d":1.5,"i32":[-5,7],"ios":[8080,"http",-1],"mt":"2026-01-02T03:04:05.123456Z","q":"100m","raw":{"a":[1,"x"]}}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	// Packed repeated scalars decode too.
	packed := protowire.AppendTag(nil, 5, protowire.BytesType)
	packed = protowire.AppendBytes(packed, protowire.AppendVarint(protowire.AppendVarint(nil, 1), 2))
	got, err = m.Unmarshal(packed)
	if err != nil || !reflect.DeepEqual(got["i32"], []any{json.Number("1"), json.Number("2")}) {
		t.Fatalf("packed: %v %v", got, err)
	}
	if _, err := m.AppendProtobuf(nil, []byte(`{"i32":[3000000000]}`)); err == nil {
		t.Fatal("int32 overflow accepted")
	}
}

func TestNewMessageErrors(t *testing.T) {
	for _, fields := range [][]Field{
		{{Name: "a", Number: 1, Kind: String}, {Name: "a", Number: 2, Kind: String}},
		{{Name: "a", Number: 1, Kind: String}, {Name: "b", Number: 1, Kind: String}},
		{{Name: "a", Number: 0, Kind: String}},
		{{Name: "a", Number: 1, Kind: MessageKind}},
		{{Name: "a", Number: 1, Kind: String, Map: true, Repeated: true}},
		{{Name: "", Number: 1, Kind: String}},
		{{Name: "a", Number: 1}},
	} {
		if _, err := NewMessage("M", fields...); err == nil {
			t.Errorf("NewMessage(%+v) accepted", fields)
		}
	}
}

func TestEnvelope(t *testing.T) {
	env := EncodeEnvelope("v1", "ConfigMap", []byte{1, 2, 3})
	u, err := DecodeEnvelope(env)
	if err != nil || u.APIVersion != "v1" || u.Kind != "ConfigMap" || !bytes.Equal(u.Raw, []byte{1, 2, 3}) {
		t.Fatalf("DecodeEnvelope = %+v, %v", u, err)
	}
	if _, err := DecodeEnvelope([]byte(`{"kind":"ConfigMap"}`)); err != ErrNotProtobuf {
		t.Errorf("JSON body: %v", err)
	}
	if _, err := DecodeEnvelope(append([]byte("k8s\x00"), 0x10, 0x01)); err == nil {
		t.Error("typeMeta as varint accepted")
	}
	if _, err := DecodeEnvelope(env[:len(env)-6]); err == nil {
		t.Error("truncated envelope accepted")
	}
}

func TestWatchFrames(t *testing.T) {
	env := EncodeEnvelope("v1", "ConfigMap", []byte{0x0a, 0})
	var stream []byte
	stream = AppendProtobufWatchEvent(stream, "ADDED", env)
	stream = AppendProtobufWatchEvent(stream, "DELETED", env)
	r := bytes.NewReader(stream)
	for _, want := range []string{"ADDED", "DELETED"} {
		frame, err := ReadFrame(r, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		typ, obj, err := DecodeWatchEvent(frame)
		if err != nil || typ != want || !bytes.Equal(obj, env) {
			t.Fatalf("event = %q %x %v", typ, obj, err)
		}
	}
	if _, err := ReadFrame(r, 1<<20); err == nil {
		t.Fatal("read past the end")
	}
	if _, err := ReadFrame(bytes.NewReader(stream), 4); err == nil {
		t.Fatal("frame limit not applied")
	}
	line := AppendJSONWatchEvent(nil, "MODIFIED", []byte(`{"a":1}`))
	if string(line) != `{"type":"MODIFIED","object":{"a":1}}`+"\n" {
		t.Fatalf("JSON event %q", line)
	}
}

func TestTopLevelFields(t *testing.T) {
	got, err := TopLevelFields([]byte(` {"kind":"X", "metadata" : {"name":"a","x":[1,{"y":"}"}]} ,"z":null}`), "metadata", "absent", "kind")
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0]) != `{"name":"a","x":[1,{"y":"}"}]}` || got[1] != nil || string(got[2]) != `"X"` {
		t.Fatalf("TopLevelFields = %q", got)
	}
	kind, av, err := TypeMeta([]byte(`{"apiVersion":"v1","kind":"Status","metadata":{}}`))
	if err != nil || kind != "Status" || av != "v1" {
		t.Fatalf("TypeMeta = %q %q %v", kind, av, err)
	}
}

// FuzzMessageUnmarshal decodes arbitrary bytes as a ConfigMap: never a
// panic, and what decodes re-encodes to the same generic value.
func FuzzMessageUnmarshal(f *testing.F) {
	pb, _ := configMap.AppendProtobuf(nil, []byte(sampleConfigMap))
	f.Add(pb)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x22, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := configMap.Unmarshal(data)
		if err != nil {
			return
		}
		again, err := configMap.Marshal(obj)
		if err != nil {
			t.Fatalf("re-encoding %v: %v", obj, err)
		}
		obj2, err := configMap.Unmarshal(again)
		if err != nil {
			t.Fatalf("decoding the re-encoding: %v", err)
		}
		a, _ := json.Marshal(obj)
		b, _ := json.Marshal(obj2)
		if !bytes.Equal(a, b) {
			t.Fatalf("not stable:\n%s\n%s", a, b)
		}
	})
}

// FuzzTranscode transcodes arbitrary JSON: never a panic, invalid JSON is
// always refused, and what transcodes decodes.
func FuzzTranscode(f *testing.F) {
	f.Add([]byte(sampleConfigMap))
	f.Add([]byte(`{"metadata":{"labels":{"a":null}},"data":null}`))
	f.Add([]byte(`{"binaryData":{"x":""}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pb, err := configMap.AppendProtobuf(nil, data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON %q transcoded", data)
		}
		if _, err := configMap.Unmarshal(pb); err != nil {
			t.Fatalf("transcoded %q does not decode: %v", data, err)
		}
	})
}

// FuzzDecodeEnvelope: never a panic; what decodes re-encodes identically.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(EncodeEnvelope("v1", "ConfigMap", []byte{1}))
	f.Add([]byte("k8s\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := DecodeEnvelope(data)
		if err != nil {
			return
		}
		u2, err := DecodeEnvelope(EncodeEnvelope(u.APIVersion, u.Kind, u.Raw))
		if err != nil || u2.APIVersion != u.APIVersion || u2.Kind != u.Kind || !bytes.Equal(u2.Raw, u.Raw) {
			t.Fatalf("re-encoding %+v: %+v %v", u, u2, err)
		}
	})
}

// FuzzSkipValue checks the scanner agrees with encoding/json on validity.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9"}]}`, `[]`, `{"a":}`, `"x`, `1e5`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scanner{lexer{data: data}}
		_, err := s.skipValue()
		if err == nil {
			err = s.end()
		}
		if (err == nil) != json.Valid(data) {
			t.Fatalf("skipValue(%q): err=%v, json.Valid=%v", data, err, json.Valid(data))
		}
	})
}

// FuzzParseUTCSeconds checks the fast time parser against time.Parse.
func FuzzParseUTCSeconds(f *testing.F) {
	for _, s := range []string{"2026-11-22T00:54:00Z", "2024-02-29T23:59:59Z", "2023-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-22T24:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseUTCSeconds([]byte(s))
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339, s)
		if err != nil || !got.Equal(want) {
			t.Fatalf("parseUTCSeconds(%q) = %v, time.Parse = %v, %v", s, got, want, err)
		}
	})
}

// FuzzDecodeWatchEvent reads arbitrary streams as protobuf watch frames.
func FuzzDecodeWatchEvent(f *testing.F) {
	f.Add(AppendProtobufWatchEvent(nil, "ADDED", EncodeEnvelope("v1", "ConfigMap", []byte{0x0a, 0})))
	f.Add([]byte{0, 0, 0, 2, 0x0a, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			frame, err := ReadFrame(r, 1<<16)
			if err != nil {
				return
			}
			typ, obj, err := DecodeWatchEvent(frame)
			if err != nil {
				continue
			}
			again := AppendProtobufWatchEvent(nil, typ, obj)
			frame2, err := ReadFrame(bytes.NewReader(again), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			typ2, obj2, err := DecodeWatchEvent(frame2)
			if err != nil || typ2 != typ || !bytes.Equal(obj2, obj) {
				t.Fatalf("re-encoded event differs")
			}
		}
	})
}

func TestDecodeObjectWithout(t *testing.T) {
	got, err := DecodeObjectWithout([]byte(sampleConfigMap), []string{"metadata", "managedFields"}, []string{"unknownField"})
	if err != nil {
		t.Fatal(err)
	}
	want := decodeGeneric(t, sampleConfigMap)
	delete(want["metadata"].(map[string]any), "managedFields")
	delete(want, "unknownField")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for _, bad := range []string{`[]`, `{"metadata":{"managedFields":[}}`, `{"a":1} x`} {
		if _, err := DecodeObjectWithout([]byte(bad), []string{"metadata", "managedFields"}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzDecodeObjectWithout checks it against DecodeJSON: the same object less
// the dropped field, and the same verdict on validity.
func FuzzDecodeObjectWithout(f *testing.F) {
	f.Add([]byte(sampleConfigMap))
	f.Add([]byte(`{"metadata":{"managedFields":[1],"name":"x"},"a":[{"b":null}]}`))
	f.Add([]byte(`{"metadata":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeObjectWithout(data, []string{"metadata", "managedFields"})
		v, _, jerr := DecodeJSON(data)
		want, isObj := v.(map[string]any)
		if jerr != nil || !isObj {
			if err == nil {
				t.Fatalf("DecodeObjectWithout(%q) accepted what DecodeJSON refuses (%v)", data, jerr)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "max depth") {
				return
			}
			t.Fatalf("DecodeObjectWithout(%q): %v", data, err)
		}
		if md, ok := want["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("DecodeObjectWithout(%q) = %s, want %s", data, a, b)
		}
	})
}
