package badger

// MappedMemory reports the resident memory of the store's memory-mapped
// files (see Options.MaxMappedResident).
type MappedMemory struct {
	// Bound is the bound in effect in bytes; 0 when none is (the option is
	// negative, the store is in memory, or the platform is not Linux). The
	// other fields are then 0 too.
	Bound int64
	// Resident is the data directory's tables' and value logs' resident
	// bytes at the last check: measured exactly when it looked over the
	// bound (and periodically), otherwise estimated from the process's
	// file-backed resident memory.
	Resident int64
	// PagedOut is the resident bytes released by page-outs since Open.
	PagedOut int64
	// PageOuts is the number of checks that found the bound exceeded and
	// paged out.
	PageOuts int64
}

// MappedMemory reports the resident memory of the store's memory-mapped
// tables and what bounding it has released. It may be called at any time,
// also after Close (the last figures).
func (s *Store) MappedMemory() MappedMemory {
	if s.trim == nil {
		return MappedMemory{}
	}
	return s.trim.stats()
}
