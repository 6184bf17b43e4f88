package codec

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// userInfo is authentication/v1 UserInfo: extra is map<string, ExtraValue>.
var userInfo = MustMessage("UserInfo",
	Field{Name: "username", Number: 1, Kind: String},
	Field{Name: "groups", Number: 3, Kind: String, Repeated: true},
	Field{Name: "extra", Number: 4, Kind: StringList, Map: true},
)

// A StringList travels as a message with repeated string field 1, and
// decodes back to the JSON array.
func TestStringList(t *testing.T) {
	const in = `{"username":"u","groups":["g"],"extra":{"scopes":["a","b"],"none":[]}}`
	pb, err := userInfo.AppendProtobuf(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	// The "scopes" entry by hand: key = 1, value = 2 (ExtraValue{items = 1}).
	var items, entry []byte
	for _, s := range []string{"a", "b"} {
		items = protowire.AppendTag(items, 1, protowire.BytesType)
		items = protowire.AppendString(items, s)
	}
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "scopes")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendBytes(entry, items)
	found := false
	if err := Walk(pb, func(num protowire.Number, _ protowire.Type, v []byte) error {
		found = found || (num == 4 && string(v) == string(entry))
		return nil
	}); err != nil || !found {
		t.Fatalf("no entry %x in %x (%v)", entry, pb, err)
	}
	got, err := userInfo.Unmarshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: %v, want %v", got, want)
	}
}
