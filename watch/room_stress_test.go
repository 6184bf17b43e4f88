package watch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// collectUntilEnd reads w until the event of /t/zz, recording every event
// but bookmarks as "TYPE KEY REV LEN": through Next, or through NextShared
// or PollShared and Wait ("shared", "poll") with the shared frames put back
// in place.
func collectUntilEnd(t *testing.T, w *Watcher, mode string, out *[]string, done chan struct{}) {
	defer close(done)
	var buf []byte
	var sh []SharedFrame
	for len(*out) == 0 || !strings.Contains((*out)[len(*out)-1], "/t/zz ") {
		var err error
		if mode != "next" {
			if mode == "poll" {
				buf, sh, err = w.PollShared(buf[:0], sh[:0], 16<<10)
				if err == nil && len(buf) == 0 && len(sh) == 0 {
					w.Wait()
					continue
				}
			} else {
				buf, sh, err = w.NextShared(buf[:0], sh[:0], 16<<10)
			}
			var full []byte
			from := 0
			for _, f := range sh {
				full = append(full, buf[from:f.At]...)
				full = append(full, f.Frame...)
				from = f.At
			}
			full = append(full, buf[from:]...)
			for _, e := range parseLines(full) {
				if e.typ == "BOOKMARK" {
					continue
				}
				*out = append(*out, fmt.Sprintf("%s %s %d %d", e.typ, e.key, e.rev, len(e.value)))
			}
		} else {
			buf, err = w.Next(buf[:0])
			for _, e := range parseLines(buf) {
				if e.typ == "BOOKMARK" {
					continue
				}
				*out = append(*out, fmt.Sprintf("%s %s %d %d", e.typ, e.key, e.rev, len(e.value)))
			}
		}
		if err != nil {
			t.Errorf("next: %v", err)
			return
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
}

// A watch with a Room sends exactly what one without sends, whatever the
// path (initial events from the state, from storage or past the budget;
// history from storage, window or queue; Next, NextShared or PollShared; a
// filter),
// while other watches of the user take and give back room; and it holds
// nothing once stopped.
func TestRoomMatchesUnbounded(t *testing.T) {
	for _, mode := range []string{"next", "shared", "poll"} {
		for _, initial := range []bool{false, true} {
			for _, sb := range []int64{600 << 10, 40 << 10, -1} {
				t.Run(fmt.Sprintf("%s,initial=%v,state=%d", mode, initial, sb), func(t *testing.T) {
					e := newEnv(t, Settings{WindowEvents: 40, WatcherBuffer: 4, StateBytes: sb})
					for i := range 10 {
						kib := 1
						if i%2 == 0 {
							kib = 20 + i
						}
						e.put(fmt.Sprintf("%sk%d", testPrefix, i), bigValue(i, kib))
					}
					start := e.put(testPrefix+"z", "z")
					// history beyond the window of 40 events
					for i := range 30 {
						kib := 1
						if i%3 != 0 {
							kib = 17 + i%5
						}
						e.put(fmt.Sprintf("%sk%d", testPrefix, i%10), bigValue(100+i, kib))
					}
					e.waitCaughtUp()
					room := newTestRoom(64 << 10)
					stopHog := make(chan struct{})
					var hogWG sync.WaitGroup
					hogWG.Add(1)
					go func() { // the user's other watches take and give room
						defer hogWG.Done()
						for {
							select {
							case <-stopHog:
								return
							default:
							}
							if r, ok := room.TryReserve(int64(20+rand.IntN(40)) << 10); ok {
								time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
								r()
							}
							time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
						}
					}()
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					opts := Options{Encoder: e.enc, Filter: func(a any) bool { return !strings.HasPrefix(a.(string), "7") }}
					if initial {
						opts.Initial = true
					} else {
						opts.Revision = start
					}
					ref, err := e.cache.Watch(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					defer ref.Stop()
					opts.Room = room
					w, err := e.cache.Watch(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					defer w.Stop()
					var want, got []string
					d1, d2 := make(chan struct{}), make(chan struct{})
					go collectUntilEnd(t, ref, "next", &want, d1)
					go collectUntilEnd(t, w, mode, &got, d2)
					for i := range 60 {
						kib := 1
						if i%2 == 0 {
							kib = 16 + i%9
						}
						if i%11 == 5 {
							e.del(fmt.Sprintf("%sk%d", testPrefix, i%10))
							continue
						}
						e.put(fmt.Sprintf("%sk%d", testPrefix, i%10), bigValue(200+i, kib))
						time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					}
					e.put(testPrefix+"zz", "end")
					for _, d := range []chan struct{}{d1, d2} {
						select {
						case <-d:
						case <-time.After(30 * time.Second):
							t.Fatalf("stuck: ref %d, room %d events", len(want), len(got))
						}
					}
					close(stopHog)
					hogWG.Wait()
					if !slices.Equal(got, want) {
						t.Fatalf("got %d events, want %d:\n%v\n%v", len(got), len(want), got, want)
					}
					w.Stop()
					room.expectFree(t, 64<<10, "after stop")
					t.Logf("%d events", len(got))
				})
			}
		}
	}
}

// strictRoom is testRoom that counts double releases instead of hiding them.
type strictRoom struct {
	*testRoom
	doubles atomic.Int64
}

func (r *strictRoom) wrap(rel func()) func() {
	var n atomic.Int64
	return func() {
		if n.Add(1) > 1 {
			r.doubles.Add(1)
		}
		rel()
	}
}

func (r *strictRoom) Reserve(ctx context.Context, n int64) (func(), error) {
	rel, err := r.testRoom.Reserve(ctx, n)
	if err != nil {
		return nil, err
	}
	return r.wrap(rel), nil
}

func (r *strictRoom) TryReserve(n int64) (func(), bool) {
	rel, ok := r.testRoom.TryReserve(n)
	if !ok {
		return nil, false
	}
	return r.wrap(rel), true
}

// Many watches of one user (snapshot initial events, history replays,
// window watches), stopped at random points, some while still waiting for
// storage room in Watch: every reservation is given back exactly once and
// nothing deadlocks, whether they are read with Next or with PollShared
// and Wait.
func TestRoomRandomStops(t *testing.T) {
	for _, sb := range []int64{-1, 600 << 10} {
		t.Run(fmt.Sprint(sb), func(t *testing.T) {
			e := newEnv(t, Settings{WindowEvents: 10, WatcherBuffer: 4, StateBytes: sb})
			first := e.put(testPrefix+"k0", bigValue(0, 20))
			for i := range 30 {
				e.put(fmt.Sprintf("%sk%d", testPrefix, i%8), bigValue(i, 1+(i%3)*20))
			}
			e.waitCaughtUp()
			const size = 3 << 20
			room := &strictRoom{testRoom: newTestRoom(size)}
			stopW := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // writes go on
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stopW:
						return
					default:
					}
					e.put(fmt.Sprintf("%sk%d", testPrefix, i%8), bigValue(i, 1+(i%2)*20))
					time.Sleep(time.Millisecond)
				}
			}()
			var ww sync.WaitGroup
			for i := range 40 {
				ww.Add(1)
				go func() {
					defer ww.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rand.IntN(200))*time.Millisecond)
					defer cancel()
					opts := Options{Encoder: &perWatchEncoder{}, Room: room}
					switch i % 3 {
					case 0:
						opts.Initial = true
					case 1:
						opts.Revision = first
					}
					w, err := e.cache.Watch(ctx, opts)
					if err != nil {
						return // ended while waiting for room
					}
					batches, poll := rand.IntN(6), i%2 == 0
					for range batches {
						if poll { // PollShared and Wait, as the HTTP writer
							b, sh, err := w.PollShared(nil, nil, 16<<10)
							if err != nil {
								break
							}
							if len(b) == 0 && len(sh) == 0 {
								w.Wait()
							}
						} else if _, err := w.Next(nil); err != nil {
							break
						}
						time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					}
					w.Stop()
				}()
			}
			done := make(chan struct{})
			go func() { ww.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("watches stuck")
			}
			close(stopW)
			wg.Wait()
			if free, _ := room.state(); free != size {
				t.Errorf("%d bytes free after every watch stopped, want %d", free, size)
			}
			if d := room.doubles.Load(); d > 0 {
				t.Errorf("%d reservations released twice", d)
			}
		})
	}
}
