package relink

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Annotation records, on an object a restore created, the ownerReferences
// the object had when it was backed up. Its value is a JSON object holding
// the format's version and the owners, in the order of the original
// ownerReferences, each with the UID it had in the backup:
//
//	{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"md-0-7f9c","uid":"5c1d…","controller":true,"blockOwnerDeletion":true}]}
//
// The first format, which backups made before it may still hold, is a JSON
// array of the owners without their UIDs; Decode reads both, Encode writes
// the second.
//
// The Velero restore plugin writes it; the relinker reads it, links the
// object to the owners it proves to be the backed-up ones (see Judge) and
// removes it once every owner is linked. The recorded UID is a proof of
// identity only: the relinker writes the UIDs it reads live, never one
// from the annotation.
const Annotation = "initlock.dev/restored-owner-references"

// AnnotationVersion is the version of the annotation's format Encode
// writes.
const AnnotationVersion = 2

// annotationValue is the annotation's value in the format of
// AnnotationVersion.
type annotationValue struct {
	Version int        `json:"version"`
	Owners  []OwnerRef `json:"owners"`
}

// OwnerRef is one recorded owner: an ownerReference as it was backed up.
// The owner's namespace is the object's own namespace when the owner kind
// is namespaced, and none when it is cluster-scoped, as for
// ownerReferences.
type OwnerRef struct {
	// APIVersion is the owner's group/version, e.g. cluster.x-k8s.io/v1beta2.
	APIVersion string `json:"apiVersion"`
	// Kind is the owner's kind, e.g. MachineSet.
	Kind string `json:"kind"`
	// Name is the owner's name.
	Name string `json:"name"`
	// UID is the owner's UID in the backup; empty when the annotation was
	// written in the first format, which did not record it.
	UID types.UID `json:"uid,omitempty"`
	// Controller is the ownerReference's controller field as backed up; nil
	// when it was not set.
	Controller *bool `json:"controller,omitempty"`
	// BlockOwnerDeletion is the ownerReference's blockOwnerDeletion field as
	// backed up; nil when it was not set.
	BlockOwnerDeletion *bool `json:"blockOwnerDeletion,omitempty"`
}

// GroupKind returns the owner's group and kind.
func (o OwnerRef) GroupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: o.Kind}
}

// Version returns the version of the owner's APIVersion.
func (o OwnerRef) Version() string {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return gv.Version
}

// IsController tells whether the owner was the controller.
func (o OwnerRef) IsController() bool { return o.Controller != nil && *o.Controller }

// String names the owner for messages: Kind group/version name.
func (o OwnerRef) String() string { return o.Kind + " " + o.APIVersion + " " + o.Name }

// key identifies an owner regardless of the version it was recorded in.
func (o OwnerRef) key() ownerKey { return ownerKey{gk: o.GroupKind(), name: o.Name} }

type ownerKey struct {
	gk   schema.GroupKind
	name string
}

func keyOf(r metav1.OwnerReference) ownerKey {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return ownerKey{gk: schema.GroupKind{Group: gv.Group, Kind: r.Kind}, name: r.Name}
}

// ErrInvalidAnnotation is wrapped by every error Decode returns.
var ErrInvalidAnnotation = errors.New("invalid " + Annotation + " annotation")

// FromOwnerReferences records refs, with their UIDs.
func FromOwnerReferences(refs []metav1.OwnerReference) []OwnerRef {
	out := make([]OwnerRef, 0, len(refs))
	for _, r := range refs {
		out = append(out, OwnerRef{
			APIVersion:         r.APIVersion,
			Kind:               r.Kind,
			Name:               r.Name,
			UID:                r.UID,
			Controller:         cloneBool(r.Controller),
			BlockOwnerDeletion: cloneBool(r.BlockOwnerDeletion),
		})
	}
	return out
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// Merge returns the owners of a followed by those of b that a does not
// name. Owners are the same when group, kind and name are equal, whatever
// the version.
func Merge(a, b []OwnerRef) []OwnerRef {
	out := make([]OwnerRef, 0, len(a)+len(b))
	seen := make(map[ownerKey]bool, len(a)+len(b))
	for _, list := range [][]OwnerRef{a, b} {
		for _, o := range list {
			if seen[o.key()] {
				continue
			}
			seen[o.key()] = true
			out = append(out, o)
		}
	}
	return out
}

// Encode returns the annotation value for owners, in the format of
// AnnotationVersion.
func Encode(owners []OwnerRef) string {
	if owners == nil {
		owners = []OwnerRef{}
	}
	b, err := json.Marshal(annotationValue{Version: AnnotationVersion, Owners: owners})
	if err != nil { // strings and bools cannot fail to marshal
		panic(err)
	}
	return string(b)
}

// Decode parses an annotation value, in either format: a JSON object of
// AnnotationVersion, or the first format's JSON array, whose owners have
// no UID. Every owner must have an apiVersion of the form group/version (or
// version for the core group), a kind and a name; an owner named twice is
// kept once, the first time.
func Decode(value string) ([]OwnerRef, error) {
	var owners []OwnerRef
	switch trimmed := strings.TrimLeft(value, " \t\r\n"); {
	case strings.HasPrefix(trimmed, "{"):
		var v struct {
			Version *int        `json:"version"`
			Owners  *[]OwnerRef `json:"owners"`
		}
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			return nil, fmt.Errorf("%w: not a JSON object of owner references: %w", ErrInvalidAnnotation, err)
		}
		switch {
		case v.Version == nil || v.Owners == nil:
			return nil, fmt.Errorf("%w: the object must hold version and owners", ErrInvalidAnnotation)
		case *v.Version != AnnotationVersion:
			return nil, fmt.Errorf("%w: version %d is not known here (%d is): it was written by another initlock release; upgrade initlock-manager",
				ErrInvalidAnnotation, *v.Version, AnnotationVersion)
		}
		owners = *v.Owners
	default:
		if err := json.Unmarshal([]byte(value), &owners); err != nil {
			return nil, fmt.Errorf("%w: not a JSON array of owner references: %w", ErrInvalidAnnotation, err)
		}
	}
	for i, o := range owners {
		if err := validate(o); err != nil {
			return nil, fmt.Errorf("%w: owner %d: %w", ErrInvalidAnnotation, i, err)
		}
	}
	return Merge(owners, nil), nil
}

func validate(o OwnerRef) error {
	if o.APIVersion == "" || o.Kind == "" || o.Name == "" {
		return fmt.Errorf("apiVersion %q, kind %q and name %q must all be set", o.APIVersion, o.Kind, o.Name)
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil || gv.Version == "" {
		return fmt.Errorf("apiVersion %q is not group/version", o.APIVersion)
	}
	return nil
}
