package meta

import "unsafe"

// Footprint is about the memory a parsed label selector holds beyond the
// text it was parsed from (whose substrings are its keys and values): its
// requirements and their value lists. A server that keeps a selector for a
// long time (a watch) can charge for it.
func (s LabelSelector) Footprint() int {
	n := len(s.reqs) * int(unsafe.Sizeof(LabelRequirement{}))
	for _, r := range s.reqs {
		n += len(r.Values) * int(unsafe.Sizeof(""))
	}
	return n
}

// Footprint is about the memory a parsed field selector holds: its
// requirements, and their values when unescaping copied them (counted
// always).
func (s FieldSelector) Footprint() int {
	n := len(s.reqs) * int(unsafe.Sizeof(FieldRequirement{}))
	for _, r := range s.reqs {
		n += len(r.Value)
	}
	return n
}
