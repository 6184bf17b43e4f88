package etcd

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// TestFenceWrites writes with a context carrying a fence: while the fence
// key exists with its create revision, writes succeed and failed compares
// report their own errors; once the key is gone or created again, every
// write is refused with a *storage.FencedError, calls Lost, and writes
// nothing.
func TestFenceWrites(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, testOptions(t, srv, "/fence/"))
	ctx := t.Context()
	const fenceKey = "/fence-election/lead" // outside the prefix, as an election's key
	put, err := s.cli.Put(ctx, fenceKey, "me")
	if err != nil {
		t.Fatal(err)
	}
	fence := storage.Fence{Key: []byte(fenceKey), CreateRevision: put.Header.Revision}
	fctx := storage.WithFence(ctx, fence)

	k := []byte("k")
	rev, err := s.Create(fctx, k, []byte("v1"))
	if err != nil {
		t.Fatalf("Create under a holding fence: %v", err)
	}
	if _, err := s.Create(fctx, k, []byte("again")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("Create of an existing key: %v, want ErrAlreadyExists", err)
	}
	rev2, err := s.Update(fctx, k, []byte("v2"), rev)
	if err != nil {
		t.Fatalf("Update under a holding fence: %v", err)
	}
	if _, err := s.Update(fctx, k, []byte("stale"), rev); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Update at a stale revision: %v, want ErrConflict", err)
	}
	if _, err := s.Update(fctx, []byte("missing"), []byte("x"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Update of a missing key: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Delete(fctx, k, rev); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Delete at a stale revision: %v, want ErrConflict", err)
	}
	if _, _, err := s.Delete(fctx, []byte("missing"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Delete of a missing key: %v, want ErrNotFound", err)
	}

	for _, tc := range []struct {
		name       string
		breakFence func() error
	}{
		{"created again", func() error {
			if _, err := s.cli.Delete(ctx, fenceKey); err != nil {
				return err
			}
			_, err := s.cli.Put(ctx, fenceKey, "someone else")
			return err
		}},
		{"deleted", func() error { _, err := s.cli.Delete(ctx, fenceKey); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.breakFence(); err != nil {
				t.Fatal(err)
			}
			var lost atomic.Int32
			f := fence
			f.Lost = func() { lost.Add(1) }
			fctx := storage.WithFence(ctx, f)
			before, err := s.CurrentRevision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, cerr := s.Create(fctx, []byte("new"), []byte("x"))
			_, uerr := s.Update(fctx, k, []byte("x"), 0)
			_, _, derr := s.Delete(fctx, k, rev2)
			for op, err := range map[string]error{"Create": cerr, "Update": uerr, "Delete": derr} {
				var fe *storage.FencedError
				if !errors.Is(err, storage.ErrFenced) || !errors.As(err, &fe) || !bytes.Equal(fe.Fence.Key, fence.Key) {
					t.Errorf("%s under a broken fence: %v, want a *storage.FencedError", op, err)
				}
			}
			if n := lost.Load(); n != 3 {
				t.Errorf("Lost called %d times, want 3", n)
			}
			after, err := s.CurrentRevision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := s.Get(ctx, k, 0)
			if err != nil {
				t.Fatal(err)
			}
			if after != before || kv.Revision != rev2 || string(kv.Value) != "v2" {
				t.Fatalf("refused writes changed the store: revision %d -> %d, key at %d = %q", before, after, kv.Revision, kv.Value)
			}
		})
	}
	// Writes without a fence are not affected.
	if _, err := s.Update(ctx, k, []byte("v3"), rev2); err != nil {
		t.Fatalf("Update without a fence: %v", err)
	}
}

// TestElectorFence checks that the leader's context carries the fence of
// its term (its leader key and that key's create revision) and that
// writes with it succeed; that when the term's lease is revoked behind the
// leader's back (as when it expires) a late write with the term's context
// is refused and the term ends; and that the next term has a fence of its
// own that works.
func TestElectorFence(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, testOptions(t, srv, "/fence/"))
	ctx := t.Context()
	el := s.Elector(ElectorOptions{Identity: "a", TTL: 2 * time.Second})
	terms := make(chan context.Context, 2)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); el.Run(runCtx, func(ctx context.Context) { terms <- ctx; <-ctx.Done() }) }()
	t.Cleanup(func() { stop(); <-ran })

	term := func() (context.Context, storage.Fence, *clientv3.GetResponse) {
		t.Helper()
		var lctx context.Context
		select {
		case lctx = <-terms:
		case <-time.After(30 * time.Second):
			t.Fatal("no term within 30s")
		}
		f, ok := storage.FenceFrom(lctx)
		if !ok {
			t.Fatal("the leader's context carries no fence")
		}
		resp, err := s.cli.Get(ctx, string(f.Key))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != f.CreateRevision || string(resp.Kvs[0].Value) != "a" ||
			!bytes.HasPrefix(f.Key, []byte(el.Key()+"/")) {
			t.Fatalf("fence %q@%d does not name the leader key: %v", f.Key, f.CreateRevision, resp.Kvs)
		}
		return lctx, f, resp
	}
	lctx, f1, resp := term()
	if _, err := s.Create(lctx, []byte("by-leader"), []byte("1")); err != nil {
		t.Fatalf("a write of the leader: %v", err)
	}

	if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Update(context.WithoutCancel(lctx), []byte("by-leader"), []byte("late"), 0)
	if !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("a write of the old term after its lease ended: %v, want ErrFenced", err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the term did not end after its lease was revoked")
	}
	if kv, err := s.Get(ctx, []byte("by-leader"), 0); err != nil || string(kv.Value) != "1" {
		t.Fatalf("after the refused write: %q, %v; want the value %q", kv.Value, err, "1")
	}

	lctx2, f2, _ := term()
	if f2.CreateRevision <= f1.CreateRevision {
		t.Fatalf("the next term's fence %d is not above the first one's %d", f2.CreateRevision, f1.CreateRevision)
	}
	if _, err := s.Update(lctx2, []byte("by-leader"), []byte("2"), 0); err != nil {
		t.Fatalf("a write of the next term: %v", err)
	}
}
