package discovery

import (
	"crypto/sha256"
	"encoding/base64"
	"sort"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// Verbs every stored resource serves, and those of its status subresource
// (a virtual type and a custom subresource list the verbs they serve).
var (
	resourceVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	statusVerbs   = []string{"get", "patch", "update"}
	finalizeVerbs = []string{"update"}
)

// apiResource is an entry of a legacy APIResourceList.
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
// clients use to notice storage version changes: the same in every version
// of a type, as kube-apiserver's for the versions of a CRD.
func storageVersionHash(r *registry.Resource) string {
	sum := sha256.Sum256([]byte(r.Group + "/" + r.StorageVersion() + "/" + r.Kind))
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

// resourceEntries returns a resource's legacy entries (the resource, then
// its subresources) and its aggregated entry.
func resourceEntries(r *registry.Resource) ([]apiResource, discoveryResource) {
	ar := apiResource{
		Name: r.Resource, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
		Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
	}
	if r.Virtual == nil {
		ar.StorageVersionHash = storageVersionHash(r)
	}
	legacy := []apiResource{ar}
	scope := "Cluster"
	if r.Namespaced {
		scope = "Namespaced"
	}
	kind := gvk{Group: r.Group, Version: r.Version, Kind: r.Kind}
	dr := discoveryResource{
		Resource: r.Resource, ResponseKind: kind, Scope: scope, SingularResource: r.Singular,
		Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
	}
	if r.ServesFinalize() {
		legacy = append(legacy, apiResource{Name: r.Resource + "/finalize", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: finalizeVerbs})
		dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: "finalize", ResponseKind: kind, Verbs: finalizeVerbs})
	}
	if r.Subresources.Status {
		legacy = append(legacy, apiResource{Name: r.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: statusVerbs})
		dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: "status", ResponseKind: kind, Verbs: statusVerbs})
	}
	if r.Subresources.Scale != nil {
		scale := gvk{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		legacy = append(legacy, apiResource{Name: r.Resource + "/scale", Namespaced: r.Namespaced, Group: scale.Group, Version: scale.Version, Kind: scale.Kind, Verbs: statusVerbs})
		dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: "scale", ResponseKind: scale, Verbs: statusVerbs})
	}
	for _, name := range r.Subresources.CustomNames() {
		sr := r.Subresources.Custom[name]
		e := apiResource{Name: r.Resource + "/" + name, Namespaced: r.Namespaced,
			Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind, Verbs: sr.Verbs()}
		if sr.Kind.Group == r.Group && sr.Kind.Version == r.Version {
			// Same group version: left out, as kube-apiserver does.
			e.Group, e.Version = "", ""
		}
		legacy = append(legacy, e)
		dr.Subresources = append(dr.Subresources, discoverySubresource{Subresource: name,
			ResponseKind: gvk{Group: sr.Kind.Group, Version: sr.Kind.Version, Kind: sr.Kind.Kind}, Verbs: sr.Verbs()})
	}
	return legacy, dr
}
