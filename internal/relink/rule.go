package relink

import (
	"fmt"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Verdict is what the link rule (Judge) says of one recorded owner.
type Verdict string

// The verdicts. The first three link the object to the owner; the others
// leave it waiting.
const (
	// VerdictLinked: the object references the owner's UID already.
	VerdictLinked Verdict = "linked"
	// VerdictOriginal: the owner has the UID the backup recorded: it is
	// the backed-up owner itself, never deleted.
	VerdictOriginal Verdict = "original"
	// VerdictSameRestore: the owner carries the object's
	// velero.io/restore-name label: the restore that created the object
	// created it too, from the same backup.
	VerdictSameRestore Verdict = "same-restore"
	// VerdictNotFound: no owner of that kind and name exists, or its kind
	// is not served.
	VerdictNotFound Verdict = "not-found"
	// VerdictDeleting: the owner is being deleted.
	VerdictDeleting Verdict = "deleting"
	// VerdictUnproven: an object of that kind and name exists, but nothing
	// proves it is the backed-up owner: it may be an unrelated object that
	// took the name.
	VerdictUnproven Verdict = "unproven"
)

// Links tells whether the verdict links the object to the owner.
func (v Verdict) Links() bool {
	return v == VerdictLinked || v == VerdictOriginal || v == VerdictSameRestore
}

// Judgement is the link rule's answer for one recorded owner.
type Judgement struct {
	Owner   OwnerRef
	Verdict Verdict
	// UID is the UID of the object found under the owner's name; empty when
	// there is none.
	UID types.UID
	// Why says, for a verdict that does not link, why, in words for an
	// event or a person.
	Why string
	// APIVersion is the version a reference to the owner is written in:
	// the one recorded while the API server still serves it. Set by the
	// relinker, not by Judge.
	APIVersion string
}

// Judge is the link rule: it tells whether owner, the object found under
// the name of the recorded owner o (nil when there is none), is the owner
// that obj, a restored object, had in the backup. Only three things prove
// it, whatever the kinds:
//
//   - obj already references owner's UID (someone linked it: an earlier
//     patch, a controller adopting it);
//   - owner has the UID the backup recorded (it was never deleted: a
//     partial restore of lost dependents, --existing-resource-policy=update);
//   - owner carries the same velero.io/restore-name label as obj (the
//     restore that created obj created, or updated, owner from the same
//     backup; --namespace-mappings maps both alike).
//
// An owner being deleted is never linked: the garbage collector would
// delete obj with it. Anything else (an object that took the name since
// the backup, an owner restored by another restore) is unproven, and obj
// waits. Judge reads nothing but its arguments; owner must have been read
// live for its answer to be written.
func Judge(obj metav1.Object, o OwnerRef, owner metav1.Object) Judgement {
	j := Judgement{Owner: o, APIVersion: o.APIVersion}
	if owner == nil {
		j.Verdict, j.Why = VerdictNotFound, "not found"
		return j
	}
	j.UID = owner.GetUID()
	switch restore := obj.GetLabels()[velerov1.RestoreNameLabel]; {
	case owner.GetDeletionTimestamp() != nil:
		j.Verdict, j.Why = VerdictDeleting, "being deleted"
	case references(obj.GetOwnerReferences(), o, j.UID):
		j.Verdict = VerdictLinked
	case o.UID != "" && o.UID == j.UID:
		j.Verdict = VerdictOriginal
	case restore != "" && owner.GetLabels()[velerov1.RestoreNameLabel] == restore:
		j.Verdict = VerdictSameRestore
	default:
		j.Verdict, j.Why = VerdictUnproven, unproven(o, j.UID, restore)
	}
	return j
}

// references tells whether refs hold a reference to owner o with uid.
func references(refs []metav1.OwnerReference, o OwnerRef, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid && keyOf(r) == o.key() {
			return true
		}
	}
	return false
}

// unproven says why an owner found with uid is not proven to be o.
func unproven(o OwnerRef, uid types.UID, restore string) string {
	identity := fmt.Sprintf("exists with UID %s, not the backed-up UID %s", uid, o.UID)
	if o.UID == "" {
		identity = fmt.Sprintf("exists with UID %s, and the annotation (written before owner UIDs were recorded) cannot tell the backed-up one", uid)
	}
	made := fmt.Sprintf("was not restored by restore %s", restore)
	if restore == "" {
		made = "the object has no " + velerov1.RestoreNameLabel + " label to tell whether the same restore made it"
	}
	return identity + ", and " + made
}
