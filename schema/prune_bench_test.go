package schema

import (
	"encoding/json"
	"testing"

	"github.com/kapi-dev/kapi/codec"
)

// widgetBody is an ordinary widget as a client sends it: integers written
// as integers.
const widgetBody = `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","labels":{"app":"a"}},
"spec":{"size":3,"tags":["a","b"],"labels":{"x":"y"},"ports":[{"name":"http","port":80},{"name":"https","port":443,"protocol":"TCP"}]}}`

// BenchmarkPruneWidget prunes a freshly decoded ordinary widget, as every
// create does.
func BenchmarkPruneWidget(b *testing.B) {
	var s Schema
	if err := json.Unmarshal([]byte(linearSchema), &s); err != nil {
		b.Fatal(err)
	}
	objs := make([]any, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if len(objs) == 0 {
			b.StopTimer()
			for range cap(objs) {
				o, _, err := codec.DecodeJSON([]byte(widgetBody))
				if err != nil {
					b.Fatal(err)
				}
				objs = append(objs, o)
			}
			b.StartTimer()
		}
		Prune(objs[len(objs)-1], &s)
		objs = objs[:len(objs)-1]
	}
}
