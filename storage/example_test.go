package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// increment is the read-modify-write loop every Store user writes: read the
// key and its revision, compute, write only if the key is still at that
// revision, and start over on a conflict.
func increment(ctx context.Context, s storage.Store, key []byte) error {
	for {
		kv, err := s.Get(ctx, key, 0)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(kv.Value))
		_, err = s.Update(ctx, key, []byte(strconv.Itoa(n+1)), kv.Revision)
		if errors.Is(err, storage.ErrConflict) {
			continue // someone else wrote first
		}
		return err
	}
}

// Compare-and-swap writes make concurrent increments lose nothing, on any
// backend (here the embedded Badger store, in memory).
func ExampleStore_compareAndSwap() {
	ctx := context.Background()
	var s storage.Store
	s, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer s.Close()

	key := []byte("/counters/visits")
	if _, err := s.Create(ctx, key, []byte("0")); err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if err := increment(ctx, s, key); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	kv, _ := s.Get(ctx, key, 0)
	fmt.Println(string(kv.Value))
	// Output:
	// 200
}

// PrefixEnd gives the exclusive end of a prefix range, for backends that
// read ranges rather than prefixes.
func ExamplePrefixEnd() {
	fmt.Printf("%q\n", storage.PrefixEnd([]byte("/registry/core/configmaps/")))
	fmt.Printf("%q\n", storage.PrefixEnd([]byte{'a', 0xff}))
	// Output:
	// "/registry/core/configmaps0"
	// "b"
}
