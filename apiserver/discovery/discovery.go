// Package discovery builds the discovery documents of a set of resource
// types, as kube-apiserver serves them and kubectl api-resources and
// client-go's discovery client read them:
//
//   - the legacy documents: APIVersions (/api), APIGroupList (/apis), an
//     APIGroup per group (/apis/GROUP) and an APIResourceList per group
//     version (/api/VERSION, /apis/GROUP/VERSION);
//   - aggregated discovery (apidiscovery.k8s.io/v2 APIGroupDiscoveryList):
//     every group version with its resources, one document for /api and one
//     for /apis.
//
// Build turns the registry's resources into the JSON of every document, once
// per set of types. Serving them (content negotiation, the v2beta1 form of
// aggregated discovery, authorization, caching per registry generation) is
// the apiserver package's.
package discovery

import (
	"encoding/json"
	"sort"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/internal/etag"
	"github.com/kapi-dev/kapi/meta"
)

// Documents are the discovery documents of one set of resource types, as
// JSON. They are shared by every request that serves them: read-only.
type Documents struct {
	// APIVersions is the legacy document of /api: the core group's
	// versions.
	APIVersions []byte
	// GroupList is the legacy document of /apis: every named group.
	GroupList []byte
	// AggregatedAPI and AggregatedAPIs are the aggregated documents
	// (APIGroupDiscoveryList) of /api and /apis.
	AggregatedAPI, AggregatedAPIs Aggregated

	groups        map[string][]byte // APIGroup per named group
	resourceLists map[string][]byte // APIResourceList per group version string
}

// Group returns the APIGroup document of a named group.
func (d *Documents) Group(name string) ([]byte, bool) {
	doc, ok := d.groups[name]
	return doc, ok
}

// ResourceList returns the APIResourceList document of a group version.
func (d *Documents) ResourceList(gv meta.GroupVersion) ([]byte, bool) {
	doc, ok := d.resourceLists[gv.String()]
	return doc, ok
}

// groupInfo is a served group with its versions, highest priority first
// (kapi serves them all).
type groupInfo struct {
	name     string
	versions []string
}

// Build returns the discovery documents of resources (the registry's
// Resources, whose order is that of each group version's resources).
func Build(resources []*registry.Resource) *Documents {
	d := &Documents{resourceLists: map[string][]byte{}, groups: map[string][]byte{}}
	groups, byGV := groupVersions(resources)
	var coreAgg, groupsAgg []discoveryGroup
	var groupList []apiGroup
	for _, g := range groups {
		dg, ag := d.buildGroup(g, byGV)
		if g.name == "" {
			coreAgg = append(coreAgg, dg)
			vs := map[string]any{"kind": "APIVersions", "versions": g.versions,
				"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}}}
			d.APIVersions, _ = json.Marshal(vs)
			continue
		}
		ag.PreferredVersion = ag.Versions[0]
		groupsAgg = append(groupsAgg, dg)
		d.groups[g.name], _ = json.Marshal(ag)
		ag.Kind, ag.APIVersion = "", ""
		groupList = append(groupList, ag)
	}
	if d.APIVersions == nil {
		d.APIVersions = []byte(`{"kind":"APIVersions","versions":[],"serverAddressByClientCIDRs":[]}`)
	}
	d.AggregatedAPI = aggregated(coreAgg)
	d.AggregatedAPIs = aggregated(groupsAgg)
	if groupList == nil {
		groupList = []apiGroup{}
	}
	d.GroupList, _ = json.Marshal(map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groupList})
	return d
}

// groupVersions returns the served groups, core first and then by name,
// each with its versions in priority order, and the resources of each group
// version (by its string) in the order of resources.
func groupVersions(resources []*registry.Resource) ([]groupInfo, map[string][]*registry.Resource) {
	byGV := map[string][]*registry.Resource{}
	versions := map[string][]string{}
	var names []string
	for _, r := range resources {
		gv := r.GroupVersion()
		key := gv.String()
		if _, ok := byGV[key]; !ok {
			if _, ok := versions[gv.Group]; !ok {
				names = append(names, gv.Group)
			}
			versions[gv.Group] = append(versions[gv.Group], gv.Version)
		}
		byGV[key] = append(byGV[key], r)
	}
	sort.Strings(names)
	groups := make([]groupInfo, 0, len(names))
	for _, g := range names {
		vs := versions[g]
		sort.Slice(vs, func(i, j int) bool { return meta.VersionLess(vs[j], vs[i]) })
		groups = append(groups, groupInfo{name: g, versions: vs})
	}
	return groups, byGV
}

// buildGroup writes the APIResourceList of each of g's versions and returns
// the group's aggregated entry and its APIGroup (versions only).
func (d *Documents) buildGroup(g groupInfo, byGV map[string][]*registry.Resource) (discoveryGroup, apiGroup) {
	dg := discoveryGroup{Metadata: map[string]any{"name": g.name, "creationTimestamp": nil}}
	ag := apiGroup{Kind: "APIGroup", APIVersion: "v1", Name: g.name}
	for _, v := range g.versions {
		gv := meta.GroupVersion{Group: g.name, Version: v}
		var legacy []apiResource
		dv := discoveryVersion{Version: v, Freshness: "Current", Resources: []discoveryResource{}}
		for _, r := range byGV[gv.String()] {
			entries, dr := resourceEntries(r)
			legacy = append(legacy, entries...)
			dv.Resources = append(dv.Resources, dr)
		}
		list := map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv.String(), "resources": legacy}
		d.resourceLists[gv.String()], _ = json.Marshal(list)
		dg.Versions = append(dg.Versions, dv)
		ag.Versions = append(ag.Versions, groupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
	}
	return dg, ag
}

func aggregated(items []discoveryGroup) Aggregated {
	if items == nil {
		items = []discoveryGroup{}
	}
	doc := func(version string) ([]byte, string) {
		b, _ := json.Marshal(map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/" + version, "metadata": map[string]any{}, "items": items})
		return b, etag.Of(b)
	}
	var a Aggregated
	a.V2, a.V2ETag = doc("v2")
	a.V2beta1, a.V2beta1ETag = doc("v2beta1")
	return a
}

// Aggregated is an aggregated discovery document in the two versions
// served (apidiscovery.k8s.io v2, and v2beta1 for older clients, the same
// document under its older apiVersion), each with its ETag.
type Aggregated struct {
	V2, V2beta1         []byte
	V2ETag, V2beta1ETag string
}
