package registry

import (
	"context"

	"github.com/kapi-dev/kapi/storage"
)

// mapWatch opens st's watch and passes each put and delete through f on its
// way to the caller; the other events pass unchanged. The returned watch
// ends after an error event (one of the backend's or one f made) or when
// ctx ends; either way the backend's watch is cancelled and drained.
func mapWatch(ctx context.Context, st storage.Store, opts storage.WatchOptions, f func(storage.Event) storage.Event) (<-chan storage.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	in, err := st.Watch(ctx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan storage.Event, cap(in))
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in { // let the backend's watch end
			}
		}()
		for ev := range in {
			if ev.Type == storage.EventPut || ev.Type == storage.EventDelete {
				ev = f(ev)
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Type == storage.EventError {
				return
			}
		}
	}()
	return out, nil
}
