//go:build !linux

package badger

// mappedTrimmer is Linux-only (madvise(MADV_PAGEOUT), /proc/self/pagemap):
// elsewhere Options.MaxMappedResident has no effect.
type mappedTrimmer struct{ done chan struct{} }

func newMappedTrimmer(Options) *mappedTrimmer { return nil }

func (*mappedTrimmer) run(<-chan struct{}) {}

func (*mappedTrimmer) stats() MappedMemory { return MappedMemory{} }
