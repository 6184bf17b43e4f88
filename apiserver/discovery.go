package apiserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"runtime"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// Verbs every stored resource serves, and those of its status subresource
// (a virtual type and a custom subresource list the verbs they serve).
var (
	resourceVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	statusVerbs   = []string{"get", "patch", "update"}
)

func defaultVersion() VersionInfo {
	return VersionInfo{
		Major: "1", Minor: "36", GitVersion: "v1.36.0-kapi", GitTreeState: "clean",
		BuildDate: "1970-01-01T00:00:00Z", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// documents are the discovery and OpenAPI documents of one generation of the
// registry, built lazily and dropped when a type is added or removed.
type documents struct {
	gen uint64

	// groupVersions: every served group version, core first.
	groups []groupInfo
	// resourceLists: APIResourceList JSON per group version string.
	resourceLists  map[string][]byte
	aggregatedAPI  []byte            // APIGroupDiscoveryList for /api
	aggregatedAPIs []byte            // APIGroupDiscoveryList for /apis
	groupList      []byte            // APIGroupList for /apis
	groupDocs      map[string][]byte // APIGroup per group
	apiVersions    []byte
	openAPIV3      map[string][]byte // "api/v1", "apis/g/v" -> document
	openAPIV3Index []byte
	openAPIV2      []byte
	openAPIV2Forms openAPIV2Forms // its ETag and protobuf form, on first use (openapi_proto.go)
}

type groupInfo struct {
	name     string
	versions []string // newest first as registered order; kapi serves all
}

func (s *Server) invalidateDocs() {
	s.docsMu.Lock()
	s.docs = nil
	s.docsMu.Unlock()
}

// documents returns the current documents, building them when needed.
func (s *Server) documents() *documents {
	s.docsMu.Lock()
	defer s.docsMu.Unlock()
	gen := s.reg.Generation()
	if s.docs != nil && s.docs.gen == gen {
		return s.docs
	}
	d := buildDocuments(s.reg.Resources())
	d.gen = gen
	s.docs = d
	return d
}

type apiResource struct {
	Name               string   `json:"name"`
	SingularName       string   `json:"singularName"`
	Namespaced         bool     `json:"namespaced"`
	Group              string   `json:"group,omitempty"`
	Version            string   `json:"version,omitempty"`
	Kind               string   `json:"kind"`
	Verbs              []string `json:"verbs"`
	ShortNames         []string `json:"shortNames,omitempty"`
	Categories         []string `json:"categories,omitempty"`
	StorageVersionHash string   `json:"storageVersionHash,omitempty"`
}

type groupVersionForDiscovery struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Kind             string                     `json:"kind,omitempty"`
	APIVersion       string                     `json:"apiVersion,omitempty"`
	Name             string                     `json:"name"`
	Versions         []groupVersionForDiscovery `json:"versions"`
	PreferredVersion groupVersionForDiscovery   `json:"preferredVersion"`
}

// Aggregated discovery (apidiscovery.k8s.io/v2).
type discoveryGroup struct {
	Metadata map[string]any     `json:"metadata"`
	Versions []discoveryVersion `json:"versions"`
}

type discoveryVersion struct {
	Version   string              `json:"version"`
	Resources []discoveryResource `json:"resources"`
	Freshness string              `json:"freshness"`
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type discoveryResource struct {
	Resource         string                 `json:"resource"`
	ResponseKind     gvk                    `json:"responseKind"`
	Scope            string                 `json:"scope"`
	SingularResource string                 `json:"singularResource"`
	Verbs            []string               `json:"verbs"`
	ShortNames       []string               `json:"shortNames,omitempty"`
	Categories       []string               `json:"categories,omitempty"`
	Subresources     []discoverySubresource `json:"subresources,omitempty"`
}

type discoverySubresource struct {
	Subresource  string   `json:"subresource"`
	ResponseKind gvk      `json:"responseKind"`
	Verbs        []string `json:"verbs"`
}

// storageVersionHash is an opaque hash of the stored group/version/kind that
// clients use to notice storage version changes.
func storageVersionHash(r *registry.Resource) string {
	sum := sha256.Sum256([]byte(r.Group + "/" + r.Version + "/" + r.Kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

func verbsOf(r *registry.Resource) []string {
	if r.Virtual != nil {
		return r.Virtual.Verbs()
	}
	verbs := append([]string{}, resourceVerbs...)
	if r.Resource != "namespaces" {
		verbs = append(verbs, "deletecollection")
		sort.Strings(verbs)
	}
	return verbs
}

func buildDocuments(resources []*registry.Resource) *documents {
	d := &documents{resourceLists: map[string][]byte{}, groupDocs: map[string][]byte{}}
	byGV := map[string][]*registry.Resource{}
	var gvOrder []meta.GroupVersion
	for _, r := range resources {
		gv := r.GroupVersion()
		key := gv.String()
		if _, ok := byGV[key]; !ok {
			gvOrder = append(gvOrder, gv)
		}
		byGV[key] = append(byGV[key], r)
	}
	// Groups: core first, then by name; versions in registration order
	// sorted by Kubernetes version priority.
	groupVersions := map[string][]string{}
	var groupNames []string
	for _, gv := range gvOrder {
		if _, ok := groupVersions[gv.Group]; !ok {
			groupNames = append(groupNames, gv.Group)
		}
		groupVersions[gv.Group] = append(groupVersions[gv.Group], gv.Version)
	}
	sort.Strings(groupNames)
	for _, g := range groupNames {
		vs := groupVersions[g]
		sort.Slice(vs, func(i, j int) bool { return versionLess(vs[j], vs[i]) })
		d.groups = append(d.groups, groupInfo{name: g, versions: vs})
	}

	var coreAgg, groupsAgg []discoveryGroup
	var groupList []apiGroup
	for _, g := range d.groups {
		dg := discoveryGroup{Metadata: map[string]any{"name": g.name, "creationTimestamp": nil}}
		ag := apiGroup{Kind: "APIGroup", APIVersion: "v1", Name: g.name}
		for _, v := range g.versions {
			gv := meta.GroupVersion{Group: g.name, Version: v}
			list := map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv.String()}
			var legacy []apiResource
			dv := discoveryVersion{Version: v, Freshness: "Current", Resources: []discoveryResource{}}
			for _, r := range byGV[gv.String()] {
				ar := apiResource{
					Name: r.Resource, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
					Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
				}
				if r.Virtual == nil {
					ar.StorageVersionHash = storageVersionHash(r)
				}
				legacy = append(legacy, ar)
				scope := "Cluster"
				if r.Namespaced {
					scope = "Namespaced"
				}
				kind := gvk{Group: r.Group, Version: r.Version, Kind: r.Kind}
				dr := discoveryResource{
					Resource: r.Resource, ResponseKind: kind, Scope: scope, SingularResource: r.Singular,
					Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
				}
				if r.Subresources.Status {
					legacy = append(legacy, apiResource{Name: r.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: statusVerbs})
					dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: "status", ResponseKind: kind, Verbs: statusVerbs})
				}
				if r.Subresources.Scale != nil {
					legacy = append(legacy, apiResource{Name: r.Resource + "/scale", Namespaced: r.Namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: statusVerbs})
					dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: "scale",
						ResponseKind: gvk{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: statusVerbs})
				}
				for _, name := range r.Subresources.CustomNames() {
					sr := r.Subresources.Custom[name]
					legacy = append(legacy, apiResource{Name: r.Resource + "/" + name, Namespaced: r.Namespaced,
						Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind, Verbs: sr.Verbs()})
					if sr.Kind.Group == r.Group && sr.Kind.Version == r.Version {
						// Same group version: left out, as kube-apiserver does.
						legacy[len(legacy)-1].Group, legacy[len(legacy)-1].Version = "", ""
					}
					dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: name,
						ResponseKind: gvk{Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind}, Verbs: sr.Verbs()})
				}
				dv.Resources = append(dv.Resources, dr)
			}
			list["resources"] = legacy
			d.resourceLists[gv.String()], _ = json.Marshal(list)
			dg.Versions = append(dg.Versions, dv)
			ag.Versions = append(ag.Versions, groupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
		}
		if g.name == "" {
			coreAgg = append(coreAgg, dg)
			vs := map[string]any{"kind": "APIVersions", "versions": g.versions,
				"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}}}
			d.apiVersions, _ = json.Marshal(vs)
			continue
		}
		ag.PreferredVersion = ag.Versions[0]
		groupsAgg = append(groupsAgg, dg)
		d.groupDocs[g.name], _ = json.Marshal(ag)
		ag.Kind, ag.APIVersion = "", ""
		groupList = append(groupList, ag)
	}
	if d.apiVersions == nil {
		d.apiVersions = []byte(`{"kind":"APIVersions","versions":[],"serverAddressByClientCIDRs":[]}`)
	}
	aggregated := func(items []discoveryGroup) []byte {
		if items == nil {
			items = []discoveryGroup{}
		}
		b, _ := json.Marshal(map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": map[string]any{}, "items": items})
		return b
	}
	d.aggregatedAPI = aggregated(coreAgg)
	d.aggregatedAPIs = aggregated(groupsAgg)
	if groupList == nil {
		groupList = []apiGroup{}
	}
	d.groupList, _ = json.Marshal(map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groupList})
	d.buildOpenAPI(resources, byGV)
	return d
}

// versionLess orders Kubernetes versions by priority: GA > beta > alpha, then
// by number (v1 < v2, v1beta1 < v1beta2).
func versionLess(a, b string) bool {
	pa, pb := versionPriority(a), versionPriority(b)
	if pa != pb {
		for i := range pa {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
		}
	}
	return a < b
}

func versionPriority(v string) [3]int {
	var major, minor int
	stage := 3 // GA
	i := 1
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		major = major*10 + int(v[i]-'0')
		i++
	}
	rest := v[i:]
	switch {
	case len(rest) >= 4 && rest[:4] == "beta":
		stage, rest = 2, rest[4:]
	case len(rest) >= 5 && rest[:5] == "alpha":
		stage, rest = 1, rest[5:]
	}
	for j := 0; j < len(rest); j++ {
		minor = minor*10 + int(rest[j]-'0')
	}
	return [3]int{stage, major, minor}
}

// Aggregated discovery media types.
var (
	offerAggregatedV2      = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "APIGroupDiscoveryList", "g": "apidiscovery.k8s.io", "v": "v2"}}
	offerAggregatedV2beta1 = codec.MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "APIGroupDiscoveryList", "g": "apidiscovery.k8s.io", "v": "v2beta1"}}
)

// serveDiscovery answers /api or /apis with aggregated discovery when the
// client asks for it, otherwise with the legacy document.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, aggregated, legacy []byte) {
	i, _ := codec.Negotiate(r.Header.Get("Accept"), []codec.MediaType{offerAggregatedV2, offerAggregatedV2beta1, offerJSON, offerYAML})
	switch i {
	case 0, 1:
		body := aggregated
		ct := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		if i == 1 {
			ct = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
			body = []byte(replaceOnce(string(aggregated), `"apidiscovery.k8s.io/v2"`, `"apidiscovery.k8s.io/v2beta1"`))
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Vary", "Accept")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	case 2, 3:
		w.Header().Set("Vary", "Accept")
		s.writeRaw(w, r, http.StatusOK, legacy)
	default:
		s.writeError(w, r, meta.NewNotAcceptable(acceptedTypes))
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

func (s *Server) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	d := s.documents()
	s.serveDiscovery(w, r, d.aggregatedAPI, d.apiVersions)
}

func (s *Server) serveAPIGroups(w http.ResponseWriter, r *http.Request) {
	d := s.documents()
	s.serveDiscovery(w, r, d.aggregatedAPIs, d.groupList)
}

func (s *Server) serveAPIGroup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	doc, ok := s.documents().groupDocs[chi.URLParam(r, "group")]
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}

func (s *Server) serveGroupVersion(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	gv := meta.GroupVersion{Group: chi.URLParam(r, "group"), Version: chi.URLParam(r, "version")}
	doc, ok := s.documents().resourceLists[gv.String()]
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	s.writeRaw(w, r, http.StatusOK, doc)
}
