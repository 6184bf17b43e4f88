package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// TestFencedLeaderPaused pauses a leader past its lease for real: its
// connection to etcd goes through a proxy that is frozen, so its lease
// keep-alives stop and its writes are held in flight. The second instance
// takes over and writes as leader (its fenced writes succeed). When the
// proxy resumes, the old leader's held writes (a raw storage update and a
// delete through the registry, as the garbage collector makes) reach etcd
// after the new leader started: they are refused with storage.ErrFenced
// (503 at the registry), and so is a fresh write with the old fence; none
// changes anything.
func TestFencedLeaderPaused(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	p := startProxy(t, srv.Endpoints()[0])
	const ttl = 2 * time.Second
	terms := func() (chan context.Context, func(context.Context)) {
		ch := make(chan context.Context, 8)
		return ch, func(ctx context.Context) { ch <- ctx }
	}
	aTerms, aLead := terms()
	a := startInstance(t, srv, "api-a", instanceOptions{electorTTL: ttl, endpoints: []string{p.endpoint()}, onLead: aLead})
	nextTerm := func(ch chan context.Context, who string) (context.Context, storage.Fence) {
		t.Helper()
		select {
		case ctx := <-ch:
			f, ok := storage.FenceFrom(ctx)
			if !ok {
				t.Fatalf("%s leads with no fence in its context", who)
			}
			return ctx, f
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not lead within 30s", who)
		}
		return nil, storage.Fence{}
	}
	aCtx, oldFence := nextTerm(aTerms, a.name)
	bTerms, bLead := terms()
	b := startInstance(t, srv, "api-b", instanceOptions{electorTTL: ttl, onLead: bLead})
	ctx := t.Context()

	// What the old leader will try to change: a configmap (seen by its
	// own watch cache before the pause) and a raw key.
	b.must(t, 201, "POST", cmPath, `{"metadata":{"name":"victim"}}`)
	eventually(t, 30*time.Second, "the configmap on "+a.name, func() bool { return a.do(t, "GET", cmPath+"/victim", "").code == 200 })
	raw := []byte("raw/fenced")
	if _, err := b.st.Create(ctx, raw, []byte("before")); err != nil {
		t.Fatal(err)
	}

	p.freeze()
	lateRaw := make(chan error, 1)
	go func() {
		_, err := a.st.Update(context.WithoutCancel(aCtx), raw, []byte("late"), 0)
		lateRaw <- err
	}()
	cms, ok := a.api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		t.Fatal("no configmaps store")
	}
	lateDelete := make(chan error, 1)
	go func() {
		_, err := cms.Delete(context.WithoutCancel(aCtx), "default", "victim", registry.DeleteOptions{PropagationPolicy: registry.PropagationBackground})
		lateDelete <- err
	}()

	// The lease expires; the second instance leads and writes.
	bCtx, newFence := nextTerm(bTerms, b.name)
	if newFence.CreateRevision <= oldFence.CreateRevision {
		t.Fatalf("new fence %q@%d not above the old one %q@%d", newFence.Key, newFence.CreateRevision, oldFence.Key, oldFence.CreateRevision)
	}
	newRev, err := b.st.Update(bCtx, raw, []byte("new leader"), 0)
	if err != nil {
		t.Fatalf("a write of the new leader: %v", err)
	}
	select {
	case err := <-lateRaw:
		t.Fatalf("the paused leader's write finished while paused: %v", err)
	case err := <-lateDelete:
		t.Fatalf("the paused leader's delete finished while paused: %v", err)
	default:
	}

	p.resume()
	for what, ch := range map[string]chan error{"storage update": lateRaw, "registry delete": lateDelete} {
		select {
		case err := <-ch:
			if !errors.Is(err, storage.ErrFenced) {
				t.Errorf("the old leader's late %s: %v, want storage.ErrFenced", what, err)
			}
			if se, ok := meta.AsStatusError(err); what == "registry delete" && (!ok || se.Code() != 503) {
				t.Errorf("the old leader's late %s: %v, want a 503 Status", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the old leader's late %s did not finish within 30s of the resume", what)
		}
	}
	if _, _, err := a.st.Delete(storage.WithFence(ctx, oldFence), raw, 0); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("a write with the old fence after the resume: %v, want storage.ErrFenced", err)
	}

	kv, err := b.st.Get(ctx, raw, 0)
	if err != nil || kv.Revision != newRev || string(kv.Value) != "new leader" {
		t.Fatalf("raw key after the old leader's writes: %q at %d, %v; want %q at %d", kv.Value, kv.Revision, err, "new leader", newRev)
	}
	b.must(t, 200, "GET", cmPath+"/victim", "")
	eventually(t, 30*time.Second, a.name+" to stop leading", func() bool { return !a.el.IsLeader() })
	if !b.el.IsLeader() {
		t.Fatalf("%s no longer leads", b.name)
	}
}
