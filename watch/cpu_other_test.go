//go:build !unix

package watch

import "time"

func processCPU() time.Duration { return 0 }
