package relink

import (
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestJudge is the link rule as data.
func TestJudge(t *testing.T) {
	const backedUp, other = types.UID("uid-backed-up"), types.UID("uid-other")
	recorded := OwnerRef{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1", UID: backedUp}
	firstFormat := recorded
	firstFormat.UID = ""
	restoredBy := func(restore string) map[string]string {
		if restore == "" {
			return nil
		}
		return map[string]string{velerov1.RestoreNameLabel: restore}
	}
	owner := func(uid types.UID, restore string, deleting bool) *metav1.ObjectMeta {
		o := &metav1.ObjectMeta{Name: "c1", UID: uid, Labels: restoredBy(restore)}
		if deleting {
			o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return o
	}
	refTo := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", UID: uid}}
	}
	tests := []struct {
		name    string
		restore string // the object's restore label
		refs    []metav1.OwnerReference
		o       OwnerRef
		owner   *metav1.ObjectMeta // nil: not found
		want    Verdict
		whyIn   []string
	}{
		{name: "no owner of that name", restore: "r1", o: recorded, want: VerdictNotFound, whyIn: []string{"not found"}},
		{name: "the backed-up owner, never deleted", restore: "r1", o: recorded, owner: owner(backedUp, "", false), want: VerdictOriginal},
		{name: "restored by the same restore", restore: "r1", o: recorded, owner: owner(other, "r1", false), want: VerdictSameRestore},
		{name: "restored by the same restore, first format", restore: "r1", o: firstFormat, owner: owner(other, "r1", false), want: VerdictSameRestore},
		{name: "already referenced by UID, in another version", restore: "r1", refs: refTo(other), o: recorded, owner: owner(other, "", false), want: VerdictLinked},
		{name: "a stale reference is no proof", restore: "r1", refs: refTo("uid-gone"), o: recorded, owner: owner(other, "", false), want: VerdictUnproven},
		{name: "being deleted, even the backed-up one", restore: "r1", o: recorded, owner: owner(backedUp, "r1", true), want: VerdictDeleting, whyIn: []string{"being deleted"}},
		{name: "being deleted and already referenced", restore: "r1", refs: refTo(other), o: recorded, owner: owner(other, "r1", true), want: VerdictDeleting},
		{
			name: "an object that took the name since the backup", restore: "r1", o: recorded, owner: owner(other, "", false), want: VerdictUnproven,
			whyIn: []string{"UID uid-other, not the backed-up UID uid-backed-up", "was not restored by restore r1"},
		},
		{
			name: "restored by another restore", restore: "r2", o: recorded, owner: owner(other, "r1", false), want: VerdictUnproven,
			whyIn: []string{"was not restored by restore r2"},
		},
		{
			name: "first format, another object", restore: "r1", o: firstFormat, owner: owner(other, "", false), want: VerdictUnproven,
			whyIn: []string{"written before owner UIDs were recorded"},
		},
		{
			name: "no restore label on either: no proof", o: recorded, owner: owner(other, "", false), want: VerdictUnproven,
			whyIn: []string{"has no " + velerov1.RestoreNameLabel + " label"},
		},
		{name: "no restore label, the backed-up owner", o: recorded, owner: owner(backedUp, "", false), want: VerdictOriginal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "cm", Labels: restoredBy(tt.restore), OwnerReferences: tt.refs}
			var j Judgement
			if tt.owner == nil {
				j = Judge(obj, tt.o, nil)
			} else {
				j = Judge(obj, tt.o, tt.owner)
			}
			if j.Verdict != tt.want {
				t.Fatalf("verdict %s (%s), want %s", j.Verdict, j.Why, tt.want)
			}
			if j.Verdict.Links() != (j.Why == "") {
				t.Errorf("verdict %s with why %q", j.Verdict, j.Why)
			}
			if tt.owner != nil && j.UID != tt.owner.UID {
				t.Errorf("UID = %s, want the owner's %s", j.UID, tt.owner.UID)
			}
			for _, s := range tt.whyIn {
				if !strings.Contains(j.Why, s) {
					t.Errorf("why %q does not say %q", j.Why, s)
				}
			}
		})
	}
}
