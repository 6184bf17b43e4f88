package schema

import (
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
)

type Port struct {
	Name     string `json:"name" kapi:"required"`
	Port     int32  `json:"port" kapi:"required,min=1,max=65535"`
	Protocol string `json:"protocol,omitempty" kapi:"enum=TCP|UDP,default=TCP"`
}

type WidgetSpec struct {
	Size     int64    `json:"size" kapi:"required,min=0" doc:"Size of the widget."`
	Color    string   `json:"color,omitempty" kapi:"enum=red|blue"`
	Replicas *int32   `json:"replicas,omitempty"`
	Tags     []string `json:"tags,omitempty" kapi:"listType=set,items.maxLength=63"`
	Ports    []Port   `json:"ports,omitempty" kapi:"listType=map,listMapKeys=name"`
}

type WidgetStatus struct {
	Replicas int32  `json:"replicas"`
	Phase    string `json:"phase"`
	Selector string `json:"selector"`
}

type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
	Status        WidgetStatus    `json:"status,omitempty"`
}

const widgetSchemaJSON = `{
  "type": "object",
  "required": ["spec"],
  "properties": {
    "apiVersion": {"type": "string", "description": "` + apiVersionDescription + `"},
    "kind": {"type": "string", "description": "` + kindDescription + `"},
    "metadata": {"type": "object", "description": "` + metadataDescription + `"},
    "spec": {
      "type": "object",
      "required": ["size"],
      "properties": {
        "size": {"type": "integer", "format": "int64", "minimum": 0, "description": "Size of the widget."},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "replicas": {"type": "integer", "format": "int32"},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 63}},
        "ports": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          "items": {
            "type": "object",
            "required": ["name", "port"],
            "properties": {
              "name": {"type": "string"},
              "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
              "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"}
            }
          }
        }
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "replicas": {"type": "integer", "format": "int32"},
        "phase": {"type": "string"},
        "selector": {"type": "string"}
      }
    }
  }
}`

func TestFromGoTypeWidget(t *testing.T) {
	s, err := For[Widget]()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s)
	if want := canonical(t, []byte(widgetSchemaJSON)); canonical(t, got) != want {
		t.Errorf("schema:\n got %s\nwant %s", canonical(t, got), want)
	}
	if err := Check(s); err != nil {
		t.Errorf("derived schema fails Check: %v", err)
	}
	// The same object validates, prunes and defaults as against the CRD.
	obj := decodeJSON(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},
		"spec":{"size":-1,"color":"pink","bogus":1,"tags":["a","a"],"ports":[{"name":"http","port":80}]}}`)
	if d := Prune(obj, s); !reflect.DeepEqual(d, []string{"spec.bogus"}) {
		t.Errorf("pruned %q", d)
	}
	Default(obj, s)
	if p, _, _ := meta.NestedSlice(obj.(map[string]any), "spec", "ports"); p[0].(map[string]any)["protocol"] != "TCP" {
		t.Errorf("protocol not defaulted: %v", p)
	}
	want := []string{
		`spec.color: Unsupported value: "pink": supported values: "red", "blue"`,
		"spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
		`spec.tags[1]: Duplicate value: "a"`,
	}
	if got := errorStrings(Validate(obj, s)); !reflect.DeepEqual(got, want) {
		t.Errorf("validation:\n%s", strings.Join(got, "\n"))
	}
	// A typed Widget encodes to something that validates.
	r := int32(2)
	typed := Widget{TypeMeta: meta.TypeMeta{APIVersion: "example.dev/v1", Kind: "Widget"},
		Metadata: meta.ObjectMeta{Name: "w", CreationTimestamp: meta.NewTime(time.Now())},
		Spec:     WidgetSpec{Size: 1, Replicas: &r, Ports: []Port{{Name: "a", Port: 1}}}}
	m, err := meta.ToMap(typed)
	if err != nil {
		t.Fatal(err)
	}
	if errs := Validate(m, s); errs != nil {
		t.Errorf("typed widget: %v", errs)
	}
	if d := Prune(m, s); d != nil {
		t.Errorf("typed widget pruned %q", d)
	}
}

type Inner struct {
	A string `json:"a"`
	B string `json:"b"`
}

type shadow struct {
	S int `json:"s"`
}

type kinds struct {
	Inner  `json:",inline"`
	*Other // pointer embedding without a tag is inlined too
	shadow // unexported embedded struct: its exported fields count

	NoTag     string
	Skipped   string `json:"-"`
	unexp     string //nolint:unused
	B8        int8
	U16       uint16
	I         int
	U64       uint64
	F32       float32
	F64       float64
	Bool      bool
	Bytes     []byte
	Arr       [2]string
	Strs      []*string
	Map       map[string]int
	IntMap    map[int]bool
	Any       any
	Raw       json.RawMessage
	Num       json.Number
	When      time.Time
	MetaWhen  *meta.Time
	Dur       time.Duration
	IP        net.IP
	Quoted    int64 `json:"quoted,string"`
	Nested    map[string][]Inner
	Named     Inner `json:"named"`
	ObjMeta   meta.ObjectMeta
	ListMeta  meta.ListMeta
	OwnerRefs []meta.OwnerReference
}

type Other struct {
	C string `json:"c"`
}

func TestFromGoTypeKinds(t *testing.T) {
	s, err := For[kinds]()
	if err != nil {
		t.Fatal(err)
	}
	_ = kinds{}.unexp
	want := map[string]string{
		"a":         `{"type":"string"}`,
		"b":         `{"type":"string"}`,
		"c":         `{"type":"string"}`,
		"s":         `{"type":"integer","format":"int64"}`,
		"NoTag":     `{"type":"string"}`,
		"B8":        `{"type":"integer","format":"int32"}`,
		"U16":       `{"type":"integer","format":"int32"}`,
		"I":         `{"type":"integer","format":"int64"}`,
		"U64":       `{"type":"integer","format":"int64"}`,
		"F32":       `{"type":"number","format":"float"}`,
		"F64":       `{"type":"number","format":"double"}`,
		"Bool":      `{"type":"boolean"}`,
		"Bytes":     `{"type":"string","format":"byte"}`,
		"Arr":       `{"type":"array","items":{"type":"string"}}`,
		"Strs":      `{"type":"array","items":{"type":"string"}}`,
		"Map":       `{"type":"object","additionalProperties":{"type":"integer","format":"int64"}}`,
		"IntMap":    `{"type":"object","additionalProperties":{"type":"boolean"}}`,
		"Any":       `{"x-kubernetes-preserve-unknown-fields":true}`,
		"Raw":       `{"x-kubernetes-preserve-unknown-fields":true}`,
		"Num":       `{"type":"number"}`,
		"When":      `{"type":"string","format":"date-time"}`,
		"MetaWhen":  `{"type":"string","format":"date-time"}`,
		"Dur":       `{"type":"integer","format":"int64"}`,
		"IP":        `{"type":"string"}`,
		"quoted":    `{"type":"string"}`,
		"Nested":    `{"type":"object","additionalProperties":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}}}`,
		"named":     `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
		"ObjMeta":   `{"type":"object"}`,
		"ListMeta":  `{"type":"object"}`,
		"OwnerRefs": `{"type":"array","items":{"type":"object","properties":{"apiVersion":{"type":"string"},"blockOwnerDeletion":{"type":"boolean"},"controller":{"type":"boolean"},"kind":{"type":"string"},"name":{"type":"string"},"uid":{"type":"string"}}}}`,
	}
	if len(s.Properties) != len(want) {
		var names []string
		for k := range s.Properties {
			names = append(names, k)
		}
		t.Errorf("properties %q, want %d", names, len(want))
	}
	for name, js := range want {
		p := s.Properties[name]
		if p == nil {
			t.Errorf("missing property %q", name)
			continue
		}
		got, _ := json.Marshal(p)
		if canonical(t, got) != canonical(t, []byte(js)) {
			t.Errorf("%s: got %s, want %s", name, got, js)
		}
	}
	// The schema describes what encoding/json produces.
	v := kinds{Inner: Inner{A: "a"}, Other: &Other{C: "c"}, Bytes: []byte("x"), Map: map[string]int{"k": 1},
		IntMap: map[int]bool{1: true}, Any: []any{1}, Raw: json.RawMessage(`{"r":1}`), Num: "1.5",
		When: time.Now(), IP: net.ParseIP("10.0.0.1"), Quoted: 5, Nested: map[string][]Inner{"k": {{A: "x"}}}}
	m, err := meta.ToMap(v)
	if err != nil {
		t.Fatal(err)
	}
	if d := Prune(m, s); d != nil {
		t.Errorf("encoding of kinds pruned %q", d)
	}
	// nil slices and pointers without omitempty encode as null: Validate
	// rejects them, Default drops them.
	if errs := Validate(m, s); len(errs) != 3 {
		t.Errorf("nulls before Default: %v", errs)
	}
	Default(m, s)
	if errs := Validate(m, s); errs != nil {
		t.Errorf("encoding of kinds: %v", errs)
	}
}

type markers struct {
	Str   string            `json:"str" kapi:"minLength=1,maxLength=5,pattern=^a{1,3}$,format=hostname,default=aa"`
	Num   float64           `json:"num" kapi:"min=0.5,max=10,exclusiveMin,exclusiveMax,multipleOf=0.5,default=1.5"`
	Ints  []int             `json:"ints" kapi:"minItems=1,maxItems=3,items.min=0,items.enum=1|2|3,listType=atomic"`
	Obj   map[string]string `json:"obj" kapi:"minProperties=1,maxProperties=2,mapType=atomic,default={\"a\":\"b\"}"`
	Null  *string           `json:"null" kapi:"nullable,optional"`
	IOS   string            `json:"ios" kapi:"intOrString,default=80"`
	Free  map[string]any    `json:"free" kapi:"preserveUnknownFields"`
	Emb   map[string]any    `json:"emb" kapi:"embeddedResource,preserveUnknownFields"`
	SMP   []Port            `json:"smp" kapi:"patchStrategy=merge,patchMergeKey=name,listType=map,listMapKeys=name|port"`
	Typed string            `json:"typed" kapi:"type=integer,default=3"`
	Quote string            `json:"quote" kapi:"enum=\"a|b\"|c"`
	Flag  bool              `json:"flag" kapi:"default=true"`
	Def   *Port             `json:"def" kapi:"definition=dev.example.v1.Port"`
	Defs  []Port            `json:"defs" kapi:"items.definition=dev.example.v1.Port"`
}

func TestFromGoTypeMarkers(t *testing.T) {
	s, err := For[markers]()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"str":   `{"type":"string","minLength":1,"maxLength":5,"pattern":"^a{1,3}$","format":"hostname","default":"aa"}`,
		"num":   `{"type":"number","format":"double","minimum":0.5,"maximum":10,"exclusiveMinimum":true,"exclusiveMaximum":true,"multipleOf":0.5,"default":1.5}`,
		"ints":  `{"type":"array","minItems":1,"maxItems":3,"x-kubernetes-list-type":"atomic","items":{"type":"integer","format":"int64","minimum":0,"enum":[1,2,3]}}`,
		"obj":   `{"type":"object","minProperties":1,"maxProperties":2,"x-kubernetes-map-type":"atomic","additionalProperties":{"type":"string"},"default":{"a":"b"}}`,
		"null":  `{"type":"string","nullable":true}`,
		"ios":   `{"x-kubernetes-int-or-string":true,"default":80}`,
		"free":  `{"type":"object","additionalProperties":{"x-kubernetes-preserve-unknown-fields":true},"x-kubernetes-preserve-unknown-fields":true}`,
		"emb":   `{"type":"object","additionalProperties":{"x-kubernetes-preserve-unknown-fields":true},"x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-embedded-resource":true}`,
		"smp":   `{"type":"array","x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name","port"],"items":{"type":"object","required":["name","port"],"properties":{"name":{"type":"string"},"port":{"type":"integer","format":"int32","minimum":1,"maximum":65535},"protocol":{"type":"string","enum":["TCP","UDP"],"default":"TCP"}}}}`,
		"typed": `{"type":"integer","default":3}`,
		"quote": `{"type":"string","enum":["a|b","c"]}`,
		"flag":  `{"type":"boolean","default":true}`,
		"def":   `{"x-kapi-definition":"dev.example.v1.Port","type":"object","required":["name","port"],"properties":{"name":{"type":"string"},"port":{"type":"integer","format":"int32","minimum":1,"maximum":65535},"protocol":{"type":"string","enum":["TCP","UDP"],"default":"TCP"}}}`,
		"defs":  `{"type":"array","items":{"x-kapi-definition":"dev.example.v1.Port","type":"object","required":["name","port"],"properties":{"name":{"type":"string"},"port":{"type":"integer","format":"int32","minimum":1,"maximum":65535},"protocol":{"type":"string","enum":["TCP","UDP"],"default":"TCP"}}}}`,
	}
	for name, js := range want {
		got, _ := json.Marshal(s.Properties[name])
		if canonical(t, got) != canonical(t, []byte(js)) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, js)
		}
	}
	if len(s.Required) != 0 {
		t.Errorf("required = %q; fields are optional unless marked", s.Required)
	}
	if d := s.Properties["num"].Default; d != json.Number("1.5") {
		t.Errorf("numeric default = %#v, want json.Number", d)
	}
}

func TestFromGoTypeErrors(t *testing.T) {
	type recursive struct {
		Children []recursive `json:"children"`
	}
	type indirect struct {
		Next *struct {
			Back *indirect `json:"back"`
		} `json:"next"`
	}
	type selfEmbed struct {
		*selfEmbed
		A string
	}
	tests := []struct {
		typ reflect.Type
		err string
	}{
		{reflect.TypeFor[recursive](), "recursive type"},
		{reflect.TypeFor[indirect](), "recursive type"},
		{reflect.TypeFor[struct{ C chan int }](), "unsupported type chan int"},
		{reflect.TypeFor[struct{ F func() }](), "unsupported type func()"},
		{reflect.TypeFor[struct{ C complex128 }](), "unsupported type complex128"},
		{reflect.TypeFor[struct{ M map[Inner]string }](), "unsupported map key type"},
		{reflect.TypeFor[struct {
			A string `kapi:"bogus"`
		}](), `unknown marker "bogus"`},
		{reflect.TypeFor[struct {
			A string `kapi:"min"`
		}](), `marker "min" needs a value`},
		{reflect.TypeFor[struct {
			A string `kapi:"required=yes"`
		}](), `marker "required" takes no value`},
		{reflect.TypeFor[struct {
			A int `kapi:"min=x"`
		}](), `"x" is not a number`},
		{reflect.TypeFor[struct {
			A string `kapi:"maxLength=-1"`
		}](), "not a non-negative integer"},
		{reflect.TypeFor[struct {
			A string `kapi:"pattern=("`
		}](), "invalid pattern"},
		{reflect.TypeFor[struct {
			A int `kapi:"default=x"`
		}](), `cannot read "x" as a integer value`},
		{reflect.TypeFor[struct {
			A int `kapi:"min=5,default=3"`
		}](), "default 3 is not valid"},
		{reflect.TypeFor[struct {
			A string `kapi:"enum=a|b,default=c"`
		}](), `default "c" is not valid`},
		{reflect.TypeFor[struct {
			A int `kapi:"enum=1|x"`
		}](), `cannot read "x"`},
		{reflect.TypeFor[struct {
			A string `kapi:"listType=set"`
		}](), "only arrays have a list type"},
		{reflect.TypeFor[struct {
			A []string `kapi:"listType=bag"`
		}](), `unknown list type "bag"`},
		{reflect.TypeFor[struct {
			A map[string]string `kapi:"mapType=x"`
		}](), `unknown map type "x"`},
		{reflect.TypeFor[struct {
			A string `kapi:"items.maxLength=1"`
		}](), "not an array"},
		{reflect.TypeFor[struct {
			A string `kapi:"type=float"`
		}](), `unknown type "float"`},
		{reflect.TypeFor[struct {
			A string `kapi:"embeddedResource"`
		}](), "only objects can be embedded resources"},
		{reflect.TypeFor[struct {
			A float64 `kapi:"multipleOf=0"`
		}](), "must be positive"},
		{reflect.TypeFor[struct {
			A []Inner `kapi:"listType=map,listMapKeys=a"`
		}](), "must have a default or be a required property"},
		{reflect.TypeFor[struct {
			A []Inner `kapi:"listType=set"`
		}](), "must be atomic as item of a list with x-kubernetes-list-type=set"},
	}
	for _, tt := range tests {
		_, err := FromGoType(tt.typ)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("FromGoType(%v) = %v, want an error containing %q", tt.typ, err, tt.err)
		}
	}
	if _, err := FromGoType(nil); err == nil {
		t.Error("FromGoType(nil) should fail")
	}
	_ = selfEmbed{}.selfEmbed
	// A self-embedding pointer is not a cycle for encoding/json (it only
	// inlines each type once).
	if _, err := FromGoType(reflect.TypeFor[selfEmbed]()); err != nil {
		t.Errorf("self embedding: %v", err)
	}
	// The same type used twice is not a cycle.
	type twice struct {
		A Inner `json:"a"`
		B Inner `json:"b"`
	}
	if _, err := FromGoType(reflect.TypeFor[twice]()); err != nil {
		t.Errorf("twice: %v", err)
	}
}

type domTagged struct {
	X string `json:"X"`
	Y string
	Z string
}

type domPlain struct {
	X int
	Y int
}

type dominance struct {
	domTagged
	domPlain
	Z bool
}

// TestFromGoTypeDominance checks encoding/json's rules for fields with the
// same name: the shallowest wins, then the tagged one; a tie drops the name.
func TestFromGoTypeDominance(t *testing.T) {
	s, err := For[dominance]()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s)
	want := `{"type":"object","properties":{"X":{"type":"string"},"Z":{"type":"boolean"}}}`
	if canonical(t, got) != canonical(t, []byte(want)) {
		t.Errorf("got %s, want %s", got, want)
	}
	m, err := meta.ToMap(dominance{domTagged: domTagged{X: "x", Y: "y"}, domPlain: domPlain{X: 1, Y: 2}, Z: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["X"] != "x" || m["Z"] != true {
		t.Errorf("encoding/json disagrees: %v", m)
	}
}

func TestFromGoTypeScalarsAndRoots(t *testing.T) {
	for _, tt := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[string](), `{"type":"string"}`},
		{reflect.TypeFor[*[]int32](), `{"type":"array","items":{"type":"integer","format":"int32"}}`},
		{reflect.TypeFor[meta.ObjectMeta](), ""}, // at the root, ObjectMeta gets its real shape
	} {
		s, err := FromGoType(tt.typ)
		if err != nil {
			t.Fatalf("%v: %v", tt.typ, err)
		}
		got, _ := json.Marshal(s)
		if tt.want == "" {
			if s.Properties["ownerReferences"] == nil || s.Properties["labels"].AdditionalProperties == nil {
				t.Errorf("ObjectMeta at the root: %s", got)
			}
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%v: %s, want %s", tt.typ, got, tt.want)
		}
	}
}

type ruledSpec struct {
	Min      int64  `json:"min"`
	Max      int64  `json:"max" kapi:"rule=self <= 100,message=max is at most 100,reason=FieldValueForbidden"`
	Name     string `json:"name" kapi:"rule=self == oldSelf,message=name is immutable,rule=self.all(c, c != ' '),fieldPath=.x"`
	Replicas int64  `json:"replicas,omitempty" kapi:"rule=!oldSelf.hasValue() || self >= oldSelf.value(),optionalOldSelf"`
}

func (ruledSpec) ValidationRules() []ValidationRule {
	return []ValidationRule{{Rule: "self.min <= self.max", Message: "min must not exceed max"}}
}

// TestGoTypeRules: rules come from kapi markers (a rule's details after
// it) and from a type's ValidationRules.
func TestGoTypeRules(t *testing.T) {
	s, err := FromGoType(reflect.TypeFor[ruledSpec]())
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for where, want := range map[string][]ValidationRule{
		"type":     {{Rule: "self.min <= self.max", Message: "min must not exceed max"}},
		"max":      {{Rule: "self <= 100", Message: "max is at most 100", Reason: "FieldValueForbidden"}},
		"name":     {{Rule: "self == oldSelf", Message: "name is immutable"}, {Rule: "self.all(c, c != ' ')", FieldPath: ".x"}},
		"replicas": {{Rule: "!oldSelf.hasValue() || self >= oldSelf.value()", OptionalOldSelf: &yes}},
	} {
		got := s.XValidations
		if where != "type" {
			got = s.Properties[where].XValidations
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", where, got, want)
		}
	}
	if _, err := FromGoType(reflect.TypeFor[struct {
		A int `json:"a" kapi:"message=orphan"`
	}]()); err == nil || !strings.Contains(err.Error(), "must follow a rule marker") {
		t.Errorf("message without a rule: %v", err)
	}
}
