package relink

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// DefaultKinds are the kinds the relinker watches when none are given: the
// Cluster API core kinds that own or are owned in a cluster's object graph,
// and ConfigMaps. Secrets are opt-in (package secrets), so that the default
// install needs no access to them. The version is left empty: the relinker
// uses the version the API server prefers.
func DefaultKinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, k := range []string{"Cluster", "MachineDeployment", "MachineSet", "Machine", "MachinePool", "MachineHealthCheck"} {
		out = append(out, schema.GroupVersionKind{Group: capi.Group, Kind: k})
	}
	return append(out, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
}

// defaultControllers maps each of DefaultKinds that Cluster API's
// controllers give a controller reference (with blockOwnerDeletion) to an
// owner among DefaultKinds, to the kinds of those owners: MachineSets are
// controlled by MachineDeployments, Machines by MachineSets or MachinePools.
// The other references among DefaultKinds (to a Cluster, from a
// MachineDeployment, MachinePool, MachineHealthCheck or the init lock) do
// not block deletion.
var defaultControllers = map[string][]string{
	"MachineSet": {"MachineDeployment"},
	"Machine":    {"MachineSet", "MachinePool"},
}

// DefaultBlockingOwnerKinds are the kinds of DefaultKinds that Cluster API
// sets as owners with blockOwnerDeletion on others of DefaultKinds, sorted:
// relinking those references needs update on the owners' finalizers
// subresource where OwnerReferencesPermissionEnforcement is enabled.
func DefaultBlockingOwnerKinds() []schema.GroupKind {
	var out []schema.GroupKind
	for _, owners := range defaultControllers {
		for _, o := range owners {
			gk := schema.GroupKind{Group: capi.Group, Kind: o}
			if !slices.Contains(out, gk) {
				out = append(out, gk)
			}
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// DefaultSelectors restricts the ConfigMaps and Secrets the relinker caches
// (Secrets when they are enabled) to those labelled with a Cluster name, the
// ones the Velero plugin takes by default.
func DefaultSelectors() map[schema.GroupKind]labels.Selector {
	req, err := labels.NewRequirement(capi.ClusterNameLabel, selection.Exists, nil)
	if err != nil { // a constant, valid label key
		panic(err)
	}
	sel := labels.NewSelector().Add(*req)
	return map[schema.GroupKind]labels.Selector{
		{Kind: "ConfigMap"}: sel,
		{Kind: "Secret"}:    sel,
	}
}

var versionRE = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// ParseKinds parses a comma-separated list of kinds written Kind.group or
// Kind.version.group, and Kind or Kind.version for the core group, e.g.
// "Machine.cluster.x-k8s.io,KubeadmConfig.v1beta2.bootstrap.cluster.x-k8s.io,ConfigMap".
// A kind without a version is watched in the version the API server
// prefers.
func ParseKinds(s string) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	seen := map[schema.GroupKind]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, rest, _ := strings.Cut(item, ".")
		gvk := schema.GroupVersionKind{Kind: kind, Group: rest}
		if v, group, _ := strings.Cut(rest, "."); versionRE.MatchString(v) {
			gvk.Version, gvk.Group = v, group
		}
		if gvk.Kind == "" || gvk.Kind[0] < 'A' || gvk.Kind[0] > 'Z' {
			return nil, fmt.Errorf("kind %q: write it Kind.group or Kind.version.group with the kind capitalised, e.g. Machine.cluster.x-k8s.io", item)
		}
		if gvk.Group == "" && gvk.Version == "" {
			gvk.Version = "v1"
		}
		if seen[gvk.GroupKind()] {
			return nil, fmt.Errorf("kind %q is listed twice", gvk.GroupKind())
		}
		seen[gvk.GroupKind()] = true
		out = append(out, gvk)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no kind in %q", s)
	}
	return out, nil
}

// kind is a kind the relinker watches, resolved against the API server.
type kind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// cluster marks the Cluster API Cluster kind, cached with spec.paused
	// so that paused Clusters are respected; every other kind is cached as
	// metadata only.
	cluster bool
	// selector restricts what is cached; nil caches every object.
	selector labels.Selector
}

// resolveKinds fills in versions and scopes from mapper. Kinds the API
// server does not serve are an error, except that defaults may be missing
// (a management cluster without MachinePools, say) and are then skipped. The
// Cluster API Cluster kind is always included, for the paused check.
func resolveKinds(mapper meta.RESTMapper, gvks []schema.GroupVersionKind, defaults bool, selectors map[schema.GroupKind]labels.Selector) ([]kind, []schema.GroupKind, error) {
	hasCluster := false
	for _, g := range gvks {
		if g.GroupKind() == clusterGK {
			hasCluster = true
		}
	}
	if !hasCluster {
		gvks = append([]schema.GroupVersionKind{{Group: capi.Group, Kind: "Cluster"}}, gvks...)
	}
	var out []kind
	var skipped []schema.GroupKind
	for _, g := range gvks {
		var versions []string
		if g.Version != "" {
			versions = []string{g.Version}
		}
		m, err := mapper.RESTMapping(g.GroupKind(), versions...)
		if err != nil {
			if defaults && meta.IsNoMatchError(err) && g.GroupKind() != clusterGK {
				skipped = append(skipped, g.GroupKind())
				continue
			}
			return nil, nil, fmt.Errorf("kind %s is not served by the API server (install its CRD or remove it from the relinked kinds): %w", g.GroupKind(), err)
		}
		out = append(out, kind{
			gvk:        m.GroupVersionKind,
			namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace,
			cluster:    g.GroupKind() == clusterGK,
			selector:   selectors[g.GroupKind()],
		})
	}
	return out, skipped, nil
}
