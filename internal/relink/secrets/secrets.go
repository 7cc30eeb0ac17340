package secrets

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/initlock/initlock/internal/relink"
)

// The relinker lists and watches Secrets as metadata only and patches their
// ownerReferences and its annotation; it never gets, updates or deletes one.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch;patch

// Kind is the Secret kind the relinker adds.
var Kind = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// Enable returns opts with Secrets added to the relinked kinds (to
// relink.DefaultKinds when opts.Kinds is nil). Kinds that already hold
// Secrets are returned unchanged.
func Enable(opts relink.Options) relink.Options {
	kinds := opts.Kinds
	if kinds == nil {
		kinds = relink.DefaultKinds()
	}
	if slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool { return k.GroupKind() == Kind.GroupKind() }) {
		opts.Kinds = kinds
		return opts
	}
	opts.Kinds = append(slices.Clip(kinds), Kind)
	return opts
}
