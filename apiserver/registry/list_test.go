package registry

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// configMapStore returns the configmaps' Store of a registry over an
// in-memory Badger store, both closed when the test ends.
func configMapStore(t *testing.T) *Store {
	return newBuiltinStore(t, ConfigMaps())
}

// recordingSink checks ListSink's call order and ownership rules and
// records what a list handed over.
type recordingSink struct {
	t      *testing.T
	head   ListHead
	begun  bool
	ended  bool
	items  [][]byte // copies
	kept   [][]byte // the slices themselves, with KeepItems
	end    ListEnd
	replay [][]byte // the replay's items after skip
	skip   int
	failAt int // Item fails at this item (1-based; 0: never)
}

var errSink = errors.New("sink failed")

func (r *recordingSink) Begin(h ListHead) error {
	if r.begun {
		r.t.Error("Begin called twice")
	}
	r.begun, r.head = true, h
	return nil
}

func (r *recordingSink) Item(item []byte) error {
	if !r.begun || r.ended {
		r.t.Error("Item outside Begin and End")
	}
	r.items = append(r.items, bytes.Clone(item))
	if r.head.KeepItems {
		r.kept = append(r.kept, item)
	}
	if len(r.items) == r.failAt {
		return errSink
	}
	return nil
}

func (r *recordingSink) End(e ListEnd) error {
	if !r.begun || r.ended {
		r.t.Error("End without Begin, or twice")
	}
	r.ended, r.end = true, e
	if e.Replay != nil {
		return e.Replay(r.skip, func(item []byte) error {
			r.replay = append(r.replay, bytes.Clone(item))
			return nil
		})
	}
	return nil
}

// TestListSink: every way through Store.List (watch cache and storage,
// whole and paged, with and without selectors, JSON and an encoding, kept
// and reused items, replay) hands the same items over under ListSink's
// rules.
func TestListSink(t *testing.T) {
	ctx := t.Context()
	st := configMapStore(t)
	const n = 23
	for i := range n {
		obj := Object{"metadata": map[string]any{"name": fmt.Sprintf("cm-%02d", i), "labels": map[string]any{"odd": fmt.Sprint(i%2 == 1)}},
			"data": map[string]any{"v": fmt.Sprint(i)}}
		if _, err := st.Create(ctx, "ns", obj, WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	odd, err := meta.ParseLabelSelector("odd=true")
	if err != nil {
		t.Fatal(err)
	}
	// The reference: every item's JSON, collected from storage.
	var all ListResult
	if err := st.List(ctx, "ns", ListOptions{FromStorage: true, KeepItems: true}, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != n {
		t.Fatalf("%d items, want %d", len(all.Items), n)
	}
	var oddItems [][]byte
	for i, it := range all.Items {
		if i%2 == 1 {
			oddItems = append(oddItems, it)
		}
	}
	encode := func(dst, item []byte) ([]byte, error) { return append(append(dst, "enc:"...), item...), nil }
	framed := func(n int) int { return n + 3 }

	for _, fromStorage := range []bool{false, true} {
		for _, selector := range []bool{false, true} {
			for _, limit := range []int64{0, 5} {
				for _, keep := range []bool{false, true} {
					for _, encName := range []string{"json", "encoded", "shared"} {
						name := fmt.Sprintf("storage=%v/selector=%v/limit=%d/keep=%v/%s", fromStorage, selector, limit, keep, encName)
						t.Run(name, func(t *testing.T) {
							opts := ListOptions{FromStorage: fromStorage, Limit: limit, KeepItems: keep, Replay: true}
							want := all.Items
							if selector {
								opts.Labels, want = odd, oddItems
							}
							wantEnc := want
							switch encName {
							case "encoded":
								opts.Encoding = &ItemEncoding{Tag: "enc", Append: encode, FramedSize: framed}
							case "shared":
								opts.Encoding = &ItemEncoding{Tag: "enc", Append: encode, FramedSize: framed,
									Shared: func(item []byte) ([]byte, error) { return encode(nil, item) }}
							}
							if opts.Encoding != nil {
								wantEnc = nil
								for _, it := range want {
									b, _ := encode(nil, it)
									wantEnc = append(wantEnc, b)
								}
							}
							var got [][]byte
							for page := 0; ; page++ {
								r := &recordingSink{t: t, skip: 2}
								if err := st.List(ctx, "ns", opts, r); err != nil {
									t.Fatal(err)
								}
								if !r.ended {
									t.Fatal("End not called")
								}
								if r.head.Items >= 0 && r.head.Items != len(r.items) {
									t.Errorf("head.Items %d, %d items", r.head.Items, len(r.items))
								}
								if r.head.ItemsSize >= 0 {
									size := 0
									for _, it := range r.items {
										size += framed(len(it))
									}
									if size != r.head.ItemsSize {
										t.Errorf("head.ItemsSize %d, items of %d", r.head.ItemsSize, size)
									}
								} else if !fromStorage && opts.Encoding != nil {
									t.Error("a list from the watch cache with FramedSize has no ItemsSize")
								}
								if want := r.items[min(2, len(r.items)):]; !slices.EqualFunc(r.replay, want, bytes.Equal) {
									t.Errorf("replay after 2: %d items, want %d", len(r.replay), len(want))
								}
								for i, k := range r.kept {
									if !bytes.Equal(k, r.items[i]) {
										t.Errorf("kept item %d changed after Item returned", i)
									}
								}
								if limit > 0 && len(r.items) > int(limit) {
									t.Errorf("page of %d items, limit %d", len(r.items), limit)
								}
								if r.head.RemainingItemCount != nil && selector {
									t.Error("remainingItemCount with a selector")
								}
								got = append(got, r.items...)
								if r.head.Continue == "" {
									break
								}
								if page > n {
									t.Fatal("too many pages")
								}
								opts.Continue = r.head.Continue
							}
							if !slices.EqualFunc(got, wantEnc, bytes.Equal) {
								t.Errorf("%d items, want %d:\n%q\nwant\n%q", len(got), len(wantEnc), got, wantEnc)
							}
						})
					}
				}
			}
		}
	}

	t.Run("errors", func(t *testing.T) {
		// An invalid list fails before Begin.
		r := &recordingSink{t: t}
		if err := st.List(ctx, "ns", ListOptions{ResourceVersionMatch: "Sometime"}, r); meta.ReasonOf(err) != meta.StatusReasonInvalid {
			t.Errorf("invalid options: %v", err)
		}
		if r.begun {
			t.Error("Begin called for an invalid list")
		}
		// A sink's error ends the list and comes back unchanged, without End.
		for _, fromStorage := range []bool{false, true} {
			for _, limit := range []int64{0, 10} {
				r := &recordingSink{t: t, failAt: 3}
				if err := st.List(ctx, "ns", ListOptions{FromStorage: fromStorage, Limit: limit}, r); err != errSink {
					t.Errorf("storage=%v limit=%d: %v, want the sink's error", fromStorage, limit, err)
				}
				if len(r.items) != 3 || r.ended {
					t.Errorf("storage=%v limit=%d: %d items after the failure, ended %v", fromStorage, limit, len(r.items), r.ended)
				}
			}
		}
		// A list without Replay gets none.
		r = &recordingSink{t: t}
		if err := st.List(ctx, "ns", ListOptions{}, r); err != nil || r.end.Replay != nil {
			t.Errorf("replay %v without asking, err %v", r.end.Replay != nil, err)
		}
	})
}
