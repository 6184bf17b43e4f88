package codec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		in   string
		want any
		dups []string
		err  bool
	}{
		{in: `{"a":1,"b":[true,false,null],"c":"x"}`, want: map[string]any{"a": json.Number("1"), "b": []any{true, false, nil}, "c": "x"}},
		{in: ` {"n": -1.5e+3 } `, want: map[string]any{"n": json.Number("-1.5e+3")}},
		{in: `{"s":"a\"b\\c\/\n\u00e9\ud83d\ude00"}`, want: map[string]any{"s": "a\"b\\c/\né😀"}},
		{in: `{"s":"\ud800"}`, want: map[string]any{"s": "\uFFFD"}},
		{in: `{"a":1,"a":2}`, want: map[string]any{"a": json.Number("2")}, dups: []string{"a"}},
		{in: `{"spec":{"ports":[{"name":"x","name":"y"}]}}`, want: map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"name": "y"}}}}, dups: []string{"spec.ports[0].name"}},
		{in: `[]`, want: []any{}},
		{in: `{}`, want: map[string]any{}},
		{in: `{"a":1}x`, err: true},
		{in: `{"a":01}`, err: true},
		{in: `{"a":1.}`, err: true},
		{in: `{"a":}`, err: true},
		{in: `{"a" 1}`, err: true},
		{in: `{a:1}`, err: true},
		{in: `{"a":"\x"}`, err: true},
		{in: "{\"a\":\"\x01\"}", err: true},
		{in: `{"a":[1,]}`, err: true},
		{in: `{"a":tru}`, err: true},
		{in: ``, err: true},
		{in: `{"a":1`, err: true},
		{in: `"abc`, err: true},
		{in: `{"a":1e308,"b":1e-400,"c":2.0e1}`, want: map[string]any{"a": json.Number("1e308"), "b": json.Number("1e-400"), "c": json.Number("2.0e1")}},
		{in: `{"a":1e309}`, err: true},
		{in: `[-1E+400]`, err: true},
		{in: `1` + strings.Repeat("0", 309), err: true},
	}
	for _, tt := range tests {
		got, dups, err := DecodeJSON([]byte(tt.in))
		if (err != nil) != tt.err {
			t.Errorf("DecodeJSON(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if tt.err {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeJSON(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if !reflect.DeepEqual(dups, tt.dups) {
			t.Errorf("DecodeJSON(%q) dups = %v, want %v", tt.in, dups, tt.dups)
		}
	}
}

func TestDecodeJSONDepthLimit(t *testing.T) {
	deep := make([]byte, 0, 2*(MaxDepth+10))
	for i := 0; i < MaxDepth+5; i++ {
		deep = append(deep, '[')
	}
	if _, _, err := DecodeJSON(deep); err == nil {
		t.Fatal("expected an error for input nested beyond MaxDepth")
	}
}

// FuzzDecodeJSON checks that the decoder never panics and agrees with
// encoding/json on what is valid JSON and on the decoded value; like
// encoding/json decoding into any (Kubernetes' generic decoding), it refuses
// numbers beyond float64's range.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,"x",null,true]`, `{"a":{"b":[{"c":"\u00e9"}]}}`, `1e10`, `"\ud83d\ude00"`, `{"a":1,"a":2}`,
		`[1e308,1e309]`, `-1E+400`, `1e-400`, `{"a":2.0e1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, err := DecodeJSON(data)
		valid := json.Valid(data) && json.Unmarshal(data, new(any)) == nil
		if (err == nil) != valid {
			t.Fatalf("DecodeJSON(%q): err=%v but encoding/json valid=%v", data, err, valid)
		}
		if err != nil {
			return
		}
		var want any
		dec := json.NewDecoder(bytesReader(data))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json rejected %q: %v", data, err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Fatalf("DecodeJSON(%q) = %s, encoding/json = %s", data, a, b)
		}
	})
}

// TestDecodeJSONStringEveryByte puts every byte value at every offset of
// strings long enough for the eight-bytes-at-a-time scan, and compares with
// encoding/json.
func TestDecodeJSONStringEveryByte(t *testing.T) {
	for n := 7; n <= 25; n += 9 {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := bytes.Repeat([]byte{'a'}, n)
				b[pos] = byte(c)
				data := append(append([]byte{'"'}, b...), '"')
				got, _, err := DecodeJSON(data)
				if valid := json.Valid(data); (err == nil) != valid {
					t.Fatalf("DecodeJSON(%q): err=%v but json.Valid=%v", data, err, valid)
				}
				if err != nil {
					continue
				}
				var want any
				if err := json.Unmarshal(data, &want); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("DecodeJSON(%q) = %q, encoding/json = %q", data, got, want)
				}
			}
		}
	}
}
