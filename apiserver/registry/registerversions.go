package registry

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/kapi-dev/kapi/meta"
)

// RegisterVersions registers one type in several versions (see Versions),
// or replaces its registration: versions may be added, unserved or
// removed, and the storage version changed, while the server runs. A
// registration of the type with Register is replaced.
//
// It is refused when a version has no conversion, when the storage version
// is not one of the versions, and when a version objects may still be
// stored in (TypeRecord.StoredVersions) is missing: keep such a version,
// Unserved, until a migration has rewritten its objects.
func (r *Registry) RegisterVersions(def Versions) error {
	def.Versions = slices.Clone(def.Versions)
	userWarning := make([]bool, len(def.Versions))
	for i := range def.Versions {
		userWarning[i] = def.Versions[i].DeprecationWarning != ""
		if err := def.Versions[i].complete(); err != nil {
			return err
		}
	}
	vs, err := newVersionSet(def)
	if err != nil {
		return err
	}
	for i := range vs.def.Versions {
		res := &vs.def.Versions[i]
		if res.Deprecated && !userWarning[i] {
			res.DeprecationWarning = vs.deprecationWarning(res.Version)
		}
		res.storageVersion = vs.storage
	}
	gr := vs.def.Versions[0].GroupResource()
	if err := r.recordVersions(vs); err != nil {
		return err
	}
	vs.stores = map[string]*Store{}
	fields := vs.fieldManagers()
	for v, res := range vs.byName {
		st := newStore(r, res)
		st.storage, st.gate = vs.versionStorage(r.cfg.Storage, st.prefix, v), nil
		st.fields = fields[v]
		omitEmptyOnApply(st.fields, res)
		vs.stores[v] = st
	}

	r.mu.Lock()
	for gvr, st := range r.stores {
		if gvr.Group == gr.Group && gvr.Resource == gr.Resource {
			continue // replaced
		}
		if res := vs.byName[gvr.Version]; res != nil && gvr.Group == gr.Group && st.res.Kind == res.Kind {
			r.mu.Unlock()
			return fmt.Errorf("registry: kind %s is already served by %s", res.Kind, gvr.Resource)
		}
	}
	var old []*Store
	for gvr, st := range r.stores {
		if gvr.Group == gr.Group && gvr.Resource == gr.Resource {
			old = append(old, st)
			delete(r.stores, gvr)
		}
	}
	prev := r.sets[gr]
	vs.guard.gate = &writeGate{}
	if prev != nil && prev.storage == vs.storage {
		vs.guard.gate = prev.guard.gate // writes through either go on in the same version
	}
	if prev != nil {
		for v, st := range prev.stores {
			if prev.byName[v].Unserved {
				old = append(old, st)
			}
		}
	}
	for _, res := range vs.served() {
		r.stores[meta.GroupVersionResource{Group: gr.Group, Version: res.Version, Resource: gr.Resource}] = vs.stores[res.Version]
	}
	r.sets[gr] = vs
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	if prev != nil && prev.storage != vs.storage {
		prev.guard.gate.retire() // before the listeners: a migration must not start while old writes may land
	}
	for _, st := range old {
		if st.gate != nil {
			st.gate.retire() // a plain registration replaced: its writes end here too
		}
	}
	for _, st := range old {
		st.stopWatchCache() // its watches end; clients reconnect to the new one
	}
	for _, l := range listeners {
		l()
	}
	return nil
}

// recordVersions records the set's storage version and adds it to the
// stored versions, after checking that every stored version is still
// registered.
func (r *Registry) recordVersions(vs *versionSet) error {
	res := vs.byName[vs.storage]
	gr := res.GroupResource()
	return r.updateTypeRecord(context.Background(), gr, func(old TypeRecord) (TypeRecord, error) {
		stored := old.StoredVersions
		if len(stored) == 0 && old.Kind != "" {
			// Registered with Register until now: its objects are in the
			// versions it was registered in, which the record does not
			// say; any version of the set may be one, until a migration
			// has found out.
			for _, res := range vs.def.Versions {
				stored = append(stored, res.Version)
			}
		}
		for _, v := range stored {
			if vs.byName[v] == nil {
				return old, fmt.Errorf("registry: %s: objects may still be stored in version %s: keep it among the versions (Unserved if it is no longer served) until a migration to %s has finished", gr, v, vs.storage)
			}
		}
		if !slices.Contains(stored, vs.storage) {
			stored = append(slices.Clone(stored), vs.storage)
		}
		return TypeRecord{Group: gr.Group, Resource: gr.Resource, Kind: res.Kind, Namespaced: res.Namespaced,
			StorageVersion: vs.storage, StoredVersions: stored}, nil
	})
}

// UnregisterVersions stops serving every version of a type registered with
// RegisterVersions. Its objects stay in storage, and so does its record of
// the versions they may be stored in: registering the type again needs
// those versions.
func (r *Registry) UnregisterVersions(gr meta.GroupResource) error {
	r.mu.Lock()
	vs, ok := r.sets[gr]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("registry: %s is not registered with RegisterVersions", gr)
	}
	delete(r.sets, gr)
	for v := range vs.stores {
		delete(r.stores, meta.GroupVersionResource{Group: gr.Group, Version: v, Resource: gr.Resource})
	}
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	// A request that resolved one of its stores before this may still
	// write through it: the next registration, whatever its storage
	// version, does not know this gate, so retire it here (waiting for the
	// writes in flight), or a write in the old storage version could land
	// behind the migration a new storage version starts.
	vs.guard.gate.retire()
	for _, st := range vs.stores {
		st.stopWatchCache()
	}
	for _, l := range listeners {
		l()
	}
	return nil
}

// unregisterVersion removes version v from a set: the set is registered
// again without it, or, for its last version, removed (its objects stay in
// storage).
func (r *Registry) unregisterVersion(vs *versionSet, v string) error {
	gr := vs.def.Versions[0].GroupResource()
	if len(vs.def.Versions) == 1 {
		return r.UnregisterVersions(gr)
	}
	if v == vs.storage {
		return fmt.Errorf("registry: %s %s is the storage version: register the type with another storage version first", gr, v)
	}
	def := vs.def
	def.Versions = slices.DeleteFunc(slices.Clone(def.Versions), func(r Resource) bool { return r.Version == v })
	if len(def.Conversion.Spokes) > 0 {
		spokes := map[string]Spoke{}
		for name, sp := range def.Conversion.Spokes {
			if name != v {
				spokes[name] = sp
			}
		}
		def.Conversion.Spokes = spokes
	}
	return r.RegisterVersions(def)
}

// deprecationWarning is kube-apiserver's default warning for a deprecated
// version of a CRD: it names the highest served version that is not
// deprecated and ranks above v, if there is one.
func (vs *versionSet) deprecationWarning(v string) string {
	msg := fmt.Sprintf("%s %s is deprecated", vs.apiVersion(v), vs.kind)
	best := ""
	for _, res := range vs.served() {
		if !res.Deprecated && meta.VersionLess(v, res.Version) && (best == "" || meta.VersionLess(best, res.Version)) {
			best = res.Version
		}
	}
	if best != "" {
		msg += fmt.Sprintf("; use %s %s", vs.apiVersion(best), vs.kind)
	}
	return msg
}

// VersionsOf returns the versions of a type registered with
// RegisterVersions (all of them, served or not, highest priority first)
// and its storage version.
func (r *Registry) VersionsOf(gr meta.GroupResource) (versions []*Resource, storageVersion string, ok bool) {
	r.mu.RLock()
	vs, ok := r.sets[gr]
	r.mu.RUnlock()
	if !ok {
		return nil, "", false
	}
	for i := range vs.def.Versions {
		versions = append(versions, &vs.def.Versions[i])
	}
	sort.Slice(versions, func(i, j int) bool { return meta.VersionLess(versions[j].Version, versions[i].Version) })
	return versions, vs.storage, true
}

// ConvertsVersions reports whether a type registered with RegisterVersions
// converts objects between its versions with code (its Conversion is not
// None).
func (r *Registry) ConvertsVersions(gr meta.GroupResource) bool {
	r.mu.RLock()
	vs, ok := r.sets[gr]
	r.mu.RUnlock()
	return ok && !vs.none
}
