package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// The JSON and YAML output of "kubectl initlock list" is a LockList. Fields
// are only ever added to this version; a change of meaning gets a new
// apiVersion.
const (
	// ListAPIVersion is the apiVersion of LockList.
	ListAPIVersion = "initlock.dev/v1alpha1"
	// ListKind is the kind of LockList.
	ListKind = "LockList"
)

// LockList is the machine-readable output of list.
type LockList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Policy is the policy the actions were computed with.
	Policy PolicyStatus `json:"policy"`
	// PolicySource says where Policy comes from: the installed
	// initlock-manager's Deployment, the command line, or the defaults.
	PolicySource string `json:"policySource,omitempty"`
	// LockGuard is whether the lock guard is in force, which decides
	// whether a lock's protection is guarded.
	LockGuard LockGuardStatus `json:"lockGuard"`
	// Items, sorted by namespace then cluster.
	Items []LockStatus `json:"items"`
}

// PolicyStatus is the repair policy in force.
type PolicyStatus struct {
	ReleaseAfterInit bool   `json:"releaseAfterInit"`
	OrphanGrace      string `json:"orphanGrace"`
}

// LockGuardStatus is the lock guard as the command found it, with
// internal/lockguard's check: the ValidatingAdmissionPolicy that refuses
// deletes of held locks, and its binding.
type LockGuardStatus struct {
	// Name is the name of the policy and of its binding (--lock-guard).
	Name string `json:"name"`
	// State is in-force (installed as initlock ships it and bound to deny
	// every request it matches), not-in-force or unknown (the command
	// cannot read it: Reason says why).
	State string `json:"state"`
	// Reason says why it is not in force, naming the object at fault and
	// the fix, or why the state is unknown; empty when in force.
	Reason string `json:"reason,omitempty"`
}

// LockStatus is one cluster's lock.
type LockStatus struct {
	// Namespace of the lock and of its cluster.
	Namespace string `json:"namespace"`
	// Cluster is the cluster the lock belongs to.
	Cluster string `json:"cluster"`
	// Lock is the ConfigMap name, "<cluster>-lock".
	Lock string `json:"lock"`
	// LockExists is false for clusters without a lock (verdicts free and
	// lost).
	LockExists bool `json:"lockExists"`
	// Holder is the Machine the lock names (for "lost", the Machine that
	// holds the grant); empty for corrupt and foreign locks.
	Holder string `json:"holder,omitempty"`
	// HolderExists tells whether that Machine exists.
	HolderExists bool `json:"holderExists"`
	// Owner is the state of the lock's Cluster ownerReference: ok, missing,
	// stale-uid or wrong-cluster; empty when it was not judged.
	Owner string `json:"owner,omitempty"`
	// ClusterExists, ClusterInitialized and ClusterPaused describe the
	// Cluster.
	ClusterExists      bool `json:"clusterExists"`
	ClusterInitialized bool `json:"clusterInitialized"`
	ClusterPaused      bool `json:"clusterPaused"`
	// Created is when the lock ConfigMap was created (RFC 3339).
	Created string `json:"created,omitempty"`
	// ClusterAbsentSince is when the lock was marked as having no Cluster.
	ClusterAbsentSince string `json:"clusterAbsentSince,omitempty"`
	// Protection is how the lock stands against a delete: guarded (the
	// lock guard, in force, refuses every delete but a release's),
	// unguarded (no mark lets it go, but the lock guard is not in force:
	// anyone may delete it; LockList.LockGuard says why), unknown (no mark
	// lets it go, and whether the lock guard is in force is unknown),
	// releasable (a release marked it, its delete is under way or was cut
	// off), moving (clusterctl move's delete-for-move: a move is deleting
	// it, or one that failed left the mark) or deleting (being deleted,
	// held back by another controller's finalizer).
	Protection string `json:"protection,omitempty"`
	// Verdict: healthy, unowned, held-after-init, stale-holder, orphan,
	// corrupt, foreign, lost or free.
	Verdict string `json:"verdict"`
	// Action is what the installed initlock-manager, and repair, would do
	// under Policy: none, adopt, release, mark-orphan or collect; none for
	// a lock that no installed manager handles (see Problem).
	Action string `json:"action"`
	// Problem says why the lock cannot be used or touched, when it cannot,
	// or that no installed initlock-manager handles it.
	Problem string `json:"problem,omitempty"`
}

// RelinkListKind is the kind of the JSON and YAML output of "kubectl
// initlock relinks", of apiVersion ListAPIVersion, to which fields are only
// ever added, as to LockList.
const RelinkListKind = "RelinkList"

// RelinkList is the machine-readable output of relinks.
type RelinkList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// NotListed names the kinds that were not listed, and why: not served
	// by the API server, or not listable with the user's permissions.
	NotListed []string `json:"notListed,omitempty"`
	// Items, by kind in the order of --kinds, then by namespace and name.
	Items []RelinkStatus `json:"items"`
}

// RelinkStatus is one object that carries the relinker's annotation.
type RelinkStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Created is when the restore created the object (RFC 3339).
	Created string `json:"created"`
	// Problem says why the annotation cannot be read; Owners is empty then.
	Problem string `json:"problem,omitempty"`
	// Owners are the owners the annotation records, in its order, each
	// judged on a live read.
	Owners []RelinkOwnerStatus `json:"owners"`
}

// RelinkOwnerStatus is one recorded owner, as the link rule judged it.
type RelinkOwnerStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// UID is the owner's UID in the backup; empty when the annotation is
	// of the first format, which did not record it.
	UID string `json:"uid,omitempty"`
	// LiveUID is the UID of the object found under the owner's name; empty
	// when there is none.
	LiveUID string `json:"liveUID,omitempty"`
	// Verdict is the link rule's: linked, original or same-restore link
	// the object; not-found, deleting and unproven leave it waiting.
	Verdict string `json:"verdict"`
	// Reason says why a verdict that does not link does not.
	Reason string `json:"reason,omitempty"`
}

// row is one entry with its decision.
type row struct {
	entry inventory.Entry
	// unhandled, when set, says why no installed manager acts on the lock:
	// its decision's action is not taken.
	unhandled string
}

// status is the row's lock as read and decided.
func (r row) status() keeper.Status { return r.entry.Status }

// action is the action taken on the row: its decision's, unless no
// installed manager handles it.
func (r row) action() string {
	if r.unhandled != "" {
		return "none"
	}
	return r.status().Action
}

func decideAll(inv *inventory.Inventory, p usedPolicy) []row {
	rows := make([]row, 0, len(inv.Entries))
	for _, e := range inv.Entries {
		rows = append(rows, row{entry: e, unhandled: p.unhandled(e)})
	}
	return rows
}

// lockStatus is the row as list prints it, its protection rendered under
// the lock guard's state.
func (r row) lockStatus(guard LockGuardStatus) LockStatus {
	st := r.status()
	s := LockStatus{
		Namespace:          r.entry.Namespace,
		Cluster:            r.entry.ClusterName,
		Lock:               r.entry.LockName,
		LockExists:         st.LockExists,
		Holder:             st.Holder,
		HolderExists:       st.HolderExists,
		Owner:              st.Owner,
		ClusterExists:      st.ClusterExists,
		ClusterInitialized: st.ClusterInitialized,
		ClusterPaused:      st.ClusterPaused,
		Protection:         guard.protection(st.Protection),
		Verdict:            st.Verdict,
		Action:             r.action(),
	}
	if st.LockExists {
		s.Created = st.Created.UTC().Format(time.RFC3339)
		if st.ClusterAbsentSince != nil {
			s.ClusterAbsentSince = st.ClusterAbsentSince.UTC().Format(time.RFC3339)
		}
	}
	var problems []string
	if st.Err != nil {
		problems = append(problems, problem(st.Err))
	}
	if r.unhandled != "" {
		problems = append(problems, r.unhandled)
	}
	s.Problem = strings.Join(problems, "; ")
	return s
}

// problem renders a decision error without repeating the sentinel's
// package context.
func problem(err error) string {
	if errors.Is(err, initlock.ErrClusterPaused) {
		return "cluster is paused; nothing is changed until it is unpaused"
	}
	return fmt.Sprint(err)
}
