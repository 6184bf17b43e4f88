package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

const listsCount = 123 // not a multiple of the page size

// TestChunkedLists lists 100+ configmaps in pages of 10 with client-go's
// pager (protobuf and JSON) and with kubectl --chunk-size=10, and checks each
// object is seen exactly once and that the lists really were chunked.
func TestChunkedLists(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const ns = "lists"

	cfg := s.RESTConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, listsCount)
	for i := 0; i < listsCount; i++ {
		name := fmt.Sprintf("cm-%03d", i)
		want = append(want, name)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}

	for _, ct := range []string{"", "application/json"} {
		t.Run("pager/"+map[string]string{"": "default", "application/json": "json"}[ct], func(t *testing.T) {
			c := s.RESTConfig(t)
			c.AcceptContentTypes = ct
			c.ContentType = ct
			cs, err := kubernetes.NewForConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var calls []metav1.ListOptions
			var rvs []string
			p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
				l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
				mu.Lock()
				calls = append(calls, opts)
				if err == nil {
					rvs = append(rvs, l.ResourceVersion)
				}
				mu.Unlock()
				return l, err
			}))
			p.PageSize = 10
			seen := map[string]int{}
			err = p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
				seen[obj.(*corev1.ConfigMap).Name]++
				return nil
			})
			if err != nil {
				t.Fatalf("pager: %v", err)
			}
			for _, name := range want {
				if seen[name] != 1 {
					t.Errorf("%s seen %d times", name, seen[name])
				}
			}
			if len(seen) != listsCount {
				t.Errorf("pager saw %d distinct objects, want %d", len(seen), listsCount)
			}
			mu.Lock()
			defer mu.Unlock()
			if n := (listsCount + 9) / 10; len(calls) != n {
				t.Errorf("pager made %d list calls, want %d pages", len(calls), n)
			}
			for i, o := range calls {
				if o.Limit != 10 || (i == 0) != (o.Continue == "") {
					t.Errorf("call %d: limit %d continue %q", i, o.Limit, o.Continue)
				}
			}
			for _, rv := range rvs {
				if rv != rvs[0] {
					t.Errorf("pages at resourceVersions %v, want one snapshot", rvs)
					break
				}
			}
		})
	}

	t.Run("kubectl", func(t *testing.T) {
		needKubectl(t)
		r := s.Kubectl(t, "get", "configmaps", "-n", ns, "--chunk-size=10", "-o", "name", "-v=6")
		if r.Err != nil {
			t.Fatalf("kubectl get: %v\n%s", r.Err, r.Stderr)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			got = append(got, strings.TrimPrefix(l, "configmap/"))
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("kubectl -o name listed %d objects:\n%s", len(got), r.Stdout)
		}
		if c := continuedRequests(r.Stderr); c != listsCount/10 {
			t.Errorf("kubectl made %d continued requests, want %d:\n%s", c, listsCount/10, r.Stderr)
		}

		// The default (Table) output is chunked too.
		r = s.Kubectl(t, "get", "configmaps", "-n", ns, "--chunk-size=10", "-v=6")
		if r.Err != nil {
			t.Fatalf("kubectl get: %v\n%s", r.Err, r.Stderr)
		}
		rows := parseTable(t, r.Stdout)
		got = got[:0]
		for _, row := range rows {
			got = append(got, row["NAME"])
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("kubectl table listed %d rows:\n%s", len(rows), r.Stdout)
		}
		if c := continuedRequests(r.Stderr); c != listsCount/10 {
			t.Errorf("kubectl (table) made %d continued requests, want %d", c, listsCount/10)
		}
	})
}

// continuedRequests counts the list requests with a continue token in
// kubectl's -v=6 log.
func continuedRequests(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"Response" verb="GET"`) && strings.Contains(l, "/configmaps?") && strings.Contains(l, "continue=") {
			n++
		}
	}
	return n
}
