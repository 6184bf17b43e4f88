package codec_test

import (
	"fmt"

	"github.com/kapi-dev/kapi/codec"
)

var formats = map[codec.Format]string{codec.FormatJSON: "json", codec.FormatYAML: "yaml", codec.FormatProtobuf: "protobuf"}

// Choose negotiates a response representation from an Accept header as
// kube-apiserver does, including the as=Table conversion that kubectl get
// asks for.
func ExampleChoose() {
	allowAll := func(codec.Choice) bool { return true }
	for _, accept := range []string{
		"",
		"application/yaml",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
		"application/vnd.kubernetes.protobuf,application/json;q=0.9",
	} {
		c, ok := codec.Choose(accept, allowAll)
		fmt.Printf("%q -> ok=%v format=%s as=%q version=%q\n", accept, ok, formats[c.Format], c.As, c.Version)
	}
	// A server that does not offer protobuf for a type falls back to the
	// client's next choice.
	noProtobuf := func(c codec.Choice) bool { return c.Format != codec.FormatProtobuf }
	c, _ := codec.Choose("application/vnd.kubernetes.protobuf,application/json;q=0.9", noProtobuf)
	fmt.Println(formats[c.Format])
	// Output:
	// "" -> ok=true format=json as="" version=""
	// "application/yaml" -> ok=true format=yaml as="" version=""
	// "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" -> ok=true format=json as="Table" version="v1"
	// "application/vnd.kubernetes.protobuf,application/json;q=0.9" -> ok=true format=protobuf as="" version=""
	// json
}

// Negotiate is the general Accept matcher over a list of offers.
func ExampleNegotiate() {
	offers := []codec.MediaType{}
	for _, s := range []string{"application/json", "application/yaml"} {
		m, _ := codec.ParseMediaType(s)
		offers = append(offers, m)
	}
	i, _ := codec.Negotiate("text/html, application/*;q=0.5, application/yaml", offers)
	fmt.Println(offers[i])
	i, _ = codec.Negotiate("text/html", offers)
	fmt.Println(i)
	// Output:
	// application/yaml
	// -1
}

// DecodeJSON keeps numbers exact and reports duplicate fields, which the
// server turns into warnings or errors according to fieldValidation.
func ExampleDecodeJSON() {
	v, dups, err := codec.DecodeJSON([]byte(`{"spec":{"replicas":9007199254740993,"replicas":3}}`))
	fmt.Println(v, dups, err)
	// Output:
	// map[spec:map[replicas:3]] [spec.replicas] <nil>
}
