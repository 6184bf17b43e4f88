package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// linearSchema is a widget with a set, a list map and a map.
const linearSchema = `{"type":"object","properties":{"metadata":{"type":"object"},
 "spec":{"type":"object","properties":{
  "size":{"type":"integer","minimum":0,"default":1},
  "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
  "labels":{"type":"object","additionalProperties":{"type":"string"}},
  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}}}}}}`

// linearObject is a JSON object of about 2.9 MB (the 3 MiB body limit):
// 120,000 tags and 20,000 ports in reverse order, 60,000 labels, with an
// unknown field in every port.
func linearObject() string {
	var sb strings.Builder
	sb.WriteString(`{"metadata":{"name":"w"},"spec":{"tags":[`)
	for i := range 120000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"%06d"`, 120000-i)
	}
	sb.WriteString(`],"ports":[`)
	for i := range 20000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"p%06d","port":%d,"x":1}`, 20000-i, i)
	}
	sb.WriteString(`],"labels":{`)
	for i := range 60000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"l%06d":"v"`, 60000-i)
	}
	sb.WriteString(`}}}`)
	return sb.String()
}

// BenchmarkLinearSchema validates, prunes and defaults an object at the
// body size limit (each a fresh decode of it).
func BenchmarkLinearSchema(b *testing.B) {
	var s Schema
	if err := json.Unmarshal([]byte(linearSchema), &s); err != nil {
		b.Fatal(err)
	}
	js := linearObject()
	decode := func() map[string]any {
		var o map[string]any
		if err := json.Unmarshal([]byte(js), &o); err != nil {
			b.Fatal(err)
		}
		return o
	}
	b.Run("validate", func(b *testing.B) {
		o := decode()
		b.ReportAllocs()
		for b.Loop() {
			if errs := Validate(o, &s); len(errs) != 0 {
				b.Fatal(errs)
			}
		}
	})
	for name, step := range map[string]func(map[string]any){
		"prune":   func(o map[string]any) { Prune(o, &s) },
		"default": func(o map[string]any) { Default(o, &s) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				o := decode()
				b.StartTimer()
				step(o)
			}
		})
	}
}
