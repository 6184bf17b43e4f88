//go:build !unix

package etcdtest

import "context"

// lockFile does not lock where flock is missing: concurrent first builds
// then each build (the last rename wins, all results are the same binary).
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
