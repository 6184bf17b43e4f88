package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

// BenchmarkClientDecodeList measures what a client pays to read a list of
// 10,000 configmaps as kapi serves it in JSON and in protobuf: client-go's
// own deserializer, as the typed clientset uses it.
func BenchmarkClientDecodeList(b *testing.B) {
	ts := metav1.NewTime(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	list := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "20000"}}
	for i := range 10000 {
		list.Items = append(list.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("config-%06d", i), Namespace: "default", UID: "6f1f7c2e-8d4b-4f0e-9a4c-000000000000",
				ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: ts, Labels: map[string]string{"app": "bench", "tier": "backend"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: "Update", APIVersion: "v1", Time: &ts, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:a":{},"f:b":{},"f:c":{}},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}}}`)}}},
			Data: map[string]string{"a": fmt.Sprint("value-a-", i), "b": "some longer value for key b", "c": `{"json":"inside"}`},
		})
	}
	js, err := json.Marshal(list)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := codec.ListOf(registry.ConfigMaps().Protobuf).AppendProtobuf(nil, js)
	if err != nil {
		b.Fatal(err)
	}
	pb := codec.EncodeEnvelope("v1", "ConfigMapList", raw)
	decoder := scheme.Codecs.UniversalDeserializer()
	for _, tc := range []struct {
		name string
		body []byte
	}{{"JSON", js}, {"Protobuf", pb}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				obj, err := runtime.Decode(decoder, tc.body)
				if err != nil {
					b.Fatal(err)
				}
				if l := obj.(*corev1.ConfigMapList); len(l.Items) != 10000 {
					b.Fatal("short list")
				}
			}
			b.ReportMetric(float64(len(tc.body)), "body-bytes")
		})
	}
}
