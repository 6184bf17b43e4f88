package registry

import (
	"context"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestSecretStringData: stringData is merged into data (its values win) on
// create and update, and is neither stored nor returned.
func TestSecretStringData(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Secrets())
	res, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"s1"},"data":{"a":"`+b64("from data")+`","b":"`+b64("b")+`"},"stringData":{"a":"from stringData","c":"c"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": b64("from stringData"), "b": b64("b"), "c": b64("c")}
	check := func(what string) {
		t.Helper()
		got, err := st.GetObject(ctx, "ns1", "s1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got["data"], want) || got["type"] != "Opaque" {
			t.Errorf("%s: data %v type %v, want %v Opaque", what, got["data"], got["type"], want)
		}
		if _, ok := got["stringData"]; ok {
			t.Errorf("%s: stringData stored: %v", what, got["stringData"])
		}
	}
	if strings.Contains(string(res.JSON), "stringData") {
		t.Errorf("create returned stringData: %s", res.JSON)
	}
	check("create")

	res, err = st.Update(ctx, "ns1", "s1", mustObject(t, `{"metadata":{"name":"s1"},"data":{"b":"`+b64("b")+`"},"stringData":{"d":"new"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.JSON), "stringData") {
		t.Errorf("update returned stringData: %s", res.JSON)
	}
	want = map[string]any{"b": b64("b"), "d": b64("new")}
	check("update")
}

// TestSecretBase64: data that is not base64 is refused with kube-apiserver's
// 400 decode error before anything else; so are values of the wrong type.
func TestSecretBase64(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Secrets())
	for _, tc := range []struct{ body, msg string }{
		{`{"metadata":{"name":"s1"},"data":{"a":"not base64!"}}`, `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3`},
		{`{"metadata":{"name":"s1"},"data":{"a":"aGk"}}`, `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0`},
		{`{"metadata":{"name":"s1"},"data":{"a":1}}`, `Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.data of type []uint8`},
		{`{"metadata":{"name":"s1"},"stringData":{"a":true}}`, `Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal bool into Go struct field Secret.stringData of type string`},
	} {
		_, err := st.Create(ctx, "ns1", mustObject(t, tc.body), WriteOptions{})
		wantStatus(t, tc.body, err, 400, tc.msg)
	}
	if _, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"s1"},"data":{"a":"aGk=","b":""}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := st.Update(ctx, "ns1", "s1", mustObject(t, `{"metadata":{"name":"s1"},"data":{"a":"a"}}`), WriteOptions{})
	wantStatus(t, "update", err, 400, "")
}

// TestSecretValidation: keys, size and the well-known types' checks, as
// Kubernetes' ValidateSecret.
func TestSecretValidation(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Secrets())
	big := b64(strings.Repeat("x", maxSecretSize/2+1))
	for i, tc := range []struct {
		body string
		want []string // causes; none: valid
	}{
		{`{"data":{"a.b_C-1":"aGk="}}`, nil},
		{`{"data":{"a/b":"aGk=","..":""}}`, []string{"data[..] FieldValueInvalid", "data[a/b] FieldValueInvalid"}},
		{`{"data":{"a":"` + big + `","b":"` + big + `"}}`, []string{"data FieldValueTooLong"}},
		{`{"data":{"a":"` + big + `"},"stringData":{"b":"` + strings.Repeat("x", maxSecretSize/2) + `"}}`, []string{"data FieldValueTooLong"}},
		{`{"type":"kubernetes.io/service-account-token"}`, []string{"metadata.annotations[kubernetes.io/service-account.name] FieldValueRequired"}},
		{`{"type":"kubernetes.io/service-account-token","metadata":{"annotations":{"kubernetes.io/service-account.name":"sa"}}}`, nil},
		{`{"type":"kubernetes.io/dockercfg"}`, []string{"data[.dockercfg] FieldValueRequired"}},
		{`{"type":"kubernetes.io/dockercfg","stringData":{".dockercfg":"{}"}}`, nil},
		{`{"type":"kubernetes.io/dockerconfigjson","stringData":{".dockerconfigjson":"{"}}`, []string{"data[.dockerconfigjson] FieldValueInvalid"}},
		{`{"type":"kubernetes.io/dockerconfigjson","stringData":{".dockerconfigjson":"[]"}}`, []string{"data[.dockerconfigjson] FieldValueInvalid"}},
		{`{"type":"kubernetes.io/dockerconfigjson","stringData":{".dockerconfigjson":"{\"auths\":{}}"}}`, nil},
		{`{"type":"kubernetes.io/dockerconfigjson","data":{".dockercfg":"e30="}}`, []string{"data[.dockerconfigjson] FieldValueRequired"}},
		{`{"type":"kubernetes.io/basic-auth"}`, []string{"data[username] FieldValueRequired", "data[password] FieldValueRequired"}},
		{`{"type":"kubernetes.io/basic-auth","data":{"password":""}}`, nil},
		{`{"type":"kubernetes.io/ssh-auth","data":{"ssh-privatekey":""}}`, []string{"data[ssh-privatekey] FieldValueRequired"}},
		{`{"type":"kubernetes.io/ssh-auth","stringData":{"ssh-privatekey":"k"}}`, nil},
		{`{"type":"kubernetes.io/tls","stringData":{"tls.crt":"c"}}`, []string{"data[tls.key] FieldValueRequired"}},
		{`{"type":"kubernetes.io/tls","stringData":{"tls.crt":"","tls.key":""}}`, nil},
		{`{"type":"bootstrap.kubernetes.io/token","stringData":{"token-id":"abcdef"}}`, nil},
		{`{"type":"example.com/anything"}`, nil},
	} {
		obj := mustObject(t, tc.body)
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		md["generateName"] = "s-"
		_, err := st.Create(ctx, "ns1", obj, WriteOptions{DryRun: true})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%d %s: %v", i, tc.body, err)
			}
			continue
		}
		se := wantStatus(t, tc.body, err, 422, "")
		if got := causes(se); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d %s: causes %q, want %q", i, tc.body, got, tc.want)
		}
	}
}

// TestSecretImmutability: type never changes; immutable: true freezes data
// and itself, not metadata.
func TestSecretImmutability(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Secrets())
	if _, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"tls"},"type":"kubernetes.io/tls","stringData":{"tls.crt":"c","tls.key":"k"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"metadata":{"name":"tls"},"type":"Opaque","stringData":{"tls.crt":"c","tls.key":"k"}}`,
		`{"metadata":{"name":"tls"},"stringData":{"tls.crt":"c","tls.key":"k"}}`, // type defaults to Opaque
	} {
		_, err := st.Update(ctx, "ns1", "tls", mustObject(t, body), WriteOptions{})
		se := wantStatus(t, body, err, 422, "")
		if got := causes(se); !reflect.DeepEqual(got, []string{"type FieldValueInvalid"}) {
			t.Errorf("%s: causes %q", body, got)
		}
	}

	if _, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"frozen"},"immutable":true,"data":{"a":"aGk="}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"metadata":{"name":"frozen"},"immutable":true,"data":{"a":"aG8="}}`, []string{"data FieldValueForbidden"}},
		{`{"metadata":{"name":"frozen"},"immutable":true,"data":{"a":"aGk="},"stringData":{"b":"x"}}`, []string{"data FieldValueForbidden"}},
		{`{"metadata":{"name":"frozen"},"data":{"a":"aGk="}}`, []string{"immutable FieldValueForbidden"}},
		{`{"metadata":{"name":"frozen"},"immutable":false,"data":{}}`, []string{"immutable FieldValueForbidden", "data FieldValueForbidden"}},
	} {
		_, err := st.Update(ctx, "ns1", "frozen", mustObject(t, tc.body), WriteOptions{})
		se := wantStatus(t, tc.body, err, 422, "")
		if got := causes(se); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: causes %q, want %q", tc.body, got, tc.want)
		}
	}
	if _, err := st.Update(ctx, "ns1", "frozen", mustObject(t, `{"metadata":{"name":"frozen","labels":{"l":"v"}},"immutable":true,"data":{"a":"aGk="}}`), WriteOptions{}); err != nil {
		t.Errorf("a label on an immutable secret: %v", err)
	}
}

// TestSecretProtobuf: the message reads and writes core/v1 Secret's wire
// form, built here by hand from generated.proto's field numbers.
func TestSecretProtobuf(t *testing.T) {
	var wire []byte
	wire = protowire.AppendTag(wire, 1, protowire.BytesType) // metadata
	wire = protowire.AppendBytes(wire, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "s1"))
	entry := func(num protowire.Number, k string, v []byte) {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendBytes(e, v)
		wire = protowire.AppendTag(wire, num, protowire.BytesType)
		wire = protowire.AppendBytes(wire, e)
	}
	entry(2, "bin", []byte{0, 1, 0xff}) // data
	wire = protowire.AppendTag(wire, 3, protowire.BytesType)
	wire = protowire.AppendString(wire, "kubernetes.io/tls") // type
	entry(4, "plain", []byte("text"))                        // stringData
	wire = protowire.AppendTag(wire, 5, protowire.VarintType)
	wire = protowire.AppendVarint(wire, 1) // immutable

	got, err := secretMessage.Unmarshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata":   map[string]any{"name": "s1"},
		"data":       map[string]any{"bin": base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff})},
		"type":       "kubernetes.io/tls",
		"stringData": map[string]any{"plain": "text"},
		"immutable":  true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %v\nwant %v", got, want)
	}
	again, err := secretMessage.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	// The fields come in another order (JSON's); every field is the same.
	if back, err := secretMessage.Unmarshal(again); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("encoded %x: decodes to %v, %v", again, back, err)
	}
	if len(again) != len(wire) {
		t.Errorf("encoded %x\nwant    %x", again, wire)
	}
}
