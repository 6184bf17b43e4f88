package schema

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/meta"
)

type sPort struct {
	Name     string `json:"name" kapi:"required"`
	Port     int32  `json:"port" kapi:"required,min=1,max=65535"`
	Protocol string `json:"protocol,omitempty" kapi:"enum=TCP|UDP,default=TCP"`
}
type sWidget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Size     int64    `json:"size" kapi:"required,min=0"`
		Color    string   `json:"color,omitempty" kapi:"enum=red|blue"`
		Replicas *int32   `json:"replicas,omitempty"`
		Tags     []string `json:"tags,omitempty" kapi:"listType=set"`
		Ports    []sPort  `json:"ports,omitempty" kapi:"listType=map,listMapKeys=name"`
	} `json:"spec"`
	Status struct {
		Replicas int32  `json:"replicas"`
		Phase    string `json:"phase"`
	} `json:"status"`
}

func TestSmoke(t *testing.T) {
	s, err := For[sWidget]()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(s, "", " ")
	fmt.Println(string(b))
	var obj map[string]any
	json.Unmarshal([]byte(`{"apiVersion":"x/v1","kind":"W","metadata":{"name":"a","bogus":1},"spec":{"size":-1,"color":"pink","bogus":2,"tags":["a","a"],"ports":[{"name":"a","port":1,"x":1},{"name":"a","port":0}]},"status":{"replicas":"string"}}`), &obj)
	fmt.Println(Prune(obj, s))
	Default(obj, s)
	for _, e := range Validate(obj, s) {
		fmt.Println(e)
	}
	b, _ = json.Marshal(obj)
	fmt.Println(string(b))
}
