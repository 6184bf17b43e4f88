package etcd

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// recordingWatcher records the contexts of the etcd watches a Store opens.
type recordingWatcher struct {
	clientv3.Watcher
	mu   sync.Mutex
	ctxs []context.Context
}

func (r *recordingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	r.mu.Lock()
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
	return r.Watcher.Watch(ctx, key, opts...)
}

// recordingStore opens a Store on a new etcd whose etcd watches are
// recorded.
func recordingStore(t *testing.T) (*Store, *recordingWatcher) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, testOptions(t, srv, "/bounded/"))
	rec := &recordingWatcher{Watcher: s.cli.Watcher}
	s.cli.Watcher = rec
	return s, rec
}

func (r *recordingWatcher) watches() []context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]context.Context(nil), r.ctxs...)
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A bounded watch (WatchOptions.BufferBytes) whose consumer does not read
// cancels its etcd watch once its channel holds the bound, so that the etcd
// client drops what it buffered, and resumes where it stopped once the
// consumer reads: it delivers every event once, in order, and the client
// holds about the bound meanwhile, not the whole history.
func TestWatchBufferBytesPausesEtcdWatch(t *testing.T) {
	s, rec := recordingStore(t)
	ctx := t.Context()
	start, err := s.Create(ctx, []byte("w/start"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 256 << 10
	var revs []int64
	for i := range n {
		v := append(bytes.Repeat([]byte("v"), size), fmt.Sprint(i)...)
		rev, err := s.Create(ctx, fmt.Appendf(nil, "w/k%02d", i), v)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	before := heapAfterGC()
	ch, err := s.Watch(ctx, storage.WatchOptions{Prefix: []byte("w/k"), FromRevision: start, BufferBytes: 600 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// Two events fill the bound: the etcd watch is cancelled.
	deadline := time.Now().Add(15 * time.Second)
	for ws := rec.watches(); len(ws) == 0 || ws[0].Err() == nil; ws = rec.watches() {
		if time.Now().After(deadline) {
			t.Fatalf("the etcd watch was not paused: %d events in the channel", len(ch))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var grew int64
	for range 50 { // the client lets go of its buffer as the cancel goes through
		if grew = int64(heapAfterGC()) - int64(before); grew < 4<<20 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a paused watch of %d MiB of history, bound 600 KiB: %d events held, heap grew %.1f MiB", n*size>>20, len(ch), float64(grew)/(1<<20))
	if grew >= 4<<20 {
		t.Errorf("heap grew %.1f MiB with a stalled watch bounded at 600 KiB", float64(grew)/(1<<20))
	}
	if len(ch) != 2 {
		t.Errorf("%d events in the channel, want the 2 that fit the bound", len(ch))
	}
	for i, rev := range revs {
		select {
		case ev := <-ch:
			if ev.Type == storage.EventProgress {
				t.Fatalf("progress event at %d before the history was read", ev.Revision)
			}
			if ev.Type != storage.EventPut || ev.Revision != rev || string(ev.Key) != fmt.Sprintf("w/k%02d", i) {
				t.Fatalf("event %d: %v %q at %d (%v), want w/k%02d at %d", i, ev.Type, ev.Key, ev.Revision, ev.Err, i, rev)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("event %d did not come", i)
		}
	}
	if ws := rec.watches(); len(ws) < 2 {
		t.Errorf("%d etcd watches opened, want resumes after pauses", len(ws))
	}
}

// A paused watch resumes only once the event that did not fit fits: with
// a small event in the channel and a next event of most of the bound, it
// does not open etcd watch after etcd watch while the consumer is stalled.
func TestWatchBufferBytesResumesWhenTheEventFits(t *testing.T) {
	s, rec := recordingStore(t)
	ctx := t.Context()
	start, err := s.Create(ctx, []byte("w/start"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{100, 950} {
		if _, err := s.Create(ctx, fmt.Appendf(nil, "w/k%d", i), bytes.Repeat([]byte("v"), size)); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := s.Watch(ctx, storage.WatchOptions{Prefix: []byte("w/k"), FromRevision: start, BufferBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the consumer is stalled
	if n := len(rec.watches()); n > 2 {
		t.Errorf("%d etcd watches opened in a second while the consumer was stalled", n)
	}
	for i := range 2 {
		select {
		case ev := <-ch:
			if ev.Type != storage.EventPut || string(ev.Key) != fmt.Sprintf("w/k%d", i) {
				t.Fatalf("event %d: %v %q", i, ev.Type, ev.Key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not come", i)
		}
	}
}

// A bounded watch of an idle store whose consumer is stalled stops sending
// progress events once its channel is full, and then pauses on the next
// write instead of letting the etcd client buffer every write.
func TestWatchBufferBytesIdleProgress(t *testing.T) {
	s, rec := recordingStore(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, []byte("w/start"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(ctx, storage.WatchOptions{Prefix: []byte("w/k"), ProgressInterval: 2 * time.Millisecond, BufferBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(ch) < cap(ch) { // progress events fill the channel
		if time.Now().After(deadline) {
			t.Fatalf("the channel holds %d progress events", len(ch))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 4 {
		if _, err := s.Create(ctx, fmt.Appendf(nil, "w/k%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(15 * time.Second)
	for ws := rec.watches(); ws[0].Err() == nil; ws = rec.watches() {
		if time.Now().After(deadline) {
			t.Fatal("the etcd watch was not paused behind a full channel")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
