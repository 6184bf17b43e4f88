package etcd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

func TestReproEtcdSingle(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	in := startInstance(t, srv, "a", instanceOptions{})
	rv := str(in.must(t, 200, "GET", cmPath, ""), "metadata", "resourceVersion")
	var ws []*watcher
	for range 3 {
		ws = append(ws, in.watch(t, cmPath+"?watch=1&resourceVersion="+rv))
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range 10 {
				in.do(t, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c-%d-%d"}}`, w, o))
			}
		}()
	}
	wg.Wait()
	for _, w := range ws {
		evs := w.waitFor(t, 60, 10*time.Second)
		if len(evs) != 60 {
			t.Fatalf("%d events: %v", len(evs), evs)
		}
	}
}
