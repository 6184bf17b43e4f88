package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// TestLargeListStreamed: whole lists large enough to be streamed in every
// way (gzip-compressed JSON, protobuf past its 4 MiB buffer in two passes,
// PartialObjectMetadataList, a Table for kubectl get) read by client-go and
// kubectl.
func TestLargeListStreamed(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	pbCfg := s.RESTConfig(t)
	pbCfg.ContentType, pbCfg.AcceptContentTypes = protobufType, protobufType
	pbCfg.QPS, pbCfg.Burst = 1000, 1000
	pb, err := kubernetes.NewForConfig(pbCfg)
	if err != nil {
		t.Fatal(err)
	}
	jsonCfg := s.RESTConfig(t)
	jsonCfg.QPS, jsonCfg.Burst = 1000, 1000
	js, err := kubernetes.NewForConfig(jsonCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "big"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 2500 // ≈ 5.5 MB of protobuf, 6 MB of JSON
	pad := strings.Repeat("0123456789abcdef", 128)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				_, err := pb.CoreV1().ConfigMaps("big").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-%05d", i), Labels: map[string]string{"odd": fmt.Sprint(i%2 == 1)}},
					Data:       map[string]string{"i": fmt.Sprint(i), "pad": pad},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(what string, items []corev1.ConfigMap, want int) {
		t.Helper()
		if len(items) != want {
			t.Fatalf("%s: %d items, want %d", what, len(items), want)
		}
		for _, cm := range items {
			if cm.Data["pad"] != pad || cm.ResourceVersion == "" || cm.UID == "" {
				t.Fatalf("%s: item %+v", what, cm.ObjectMeta)
			}
		}
	}
	for _, rv := range []string{"", "0"} {
		l, err := pb.CoreV1().ConfigMaps("big").List(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		check("protobuf rv="+rv, l.Items, n)
		l, err = js.CoreV1().ConfigMaps("big").List(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		check("json rv="+rv, l.Items, n)
	}
	l, err := pb.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "odd=true"})
	if err != nil {
		t.Fatal(err)
	}
	check("protobuf, all namespaces, selector", l.Items, n/2)

	mc, err := metadata.NewForConfig(pbCfg)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("big").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Items) != n || ml.Items[n-1].Name != fmt.Sprintf("big-%05d", n-1) {
		t.Fatalf("metadata list: %d items", len(ml.Items))
	}

	// kubectl get, one whole list (no chunks): a streamed Table.
	out := s.MustKubectl(t, "get", "configmaps", "-n", "big", "--chunk-size=0", "--no-headers")
	if lines := strings.Count(out, "\nbig-") + 1; lines != n || !strings.HasPrefix(out, "big-00000 ") {
		t.Fatalf("kubectl get: %d rows\n%.300s", lines, out)
	}
}
