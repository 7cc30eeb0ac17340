package velerosim

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restoreExisting does what Velero's restore does with an item whose object
// exists already (pkg/restore/restore.go, restoreItem and
// processUpdateResourcePolicy): under PolicyTypeNone it leaves the object
// alone; under PolicyTypeUpdate it resets the existing object's metadata and
// status as for a restore, and patches it with a JSON merge patch towards
// desired, the item as the restore would have created it, restore labels
// included; when that patch is refused, or when nothing but the labels
// differs, it patches only the backup and restore labels. ownerReferences
// and status are never in the patch: both sides are reset. It returns the
// object as updated, or nil when it was left alone.
func (r *Restorer) restoreExisting(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return nil, fmt.Errorf("reading the existing %s %s/%s: %w", desired.GetKind(), desired.GetNamespace(), desired.GetName(), err)
	}
	if r.opts.ExistingResourcePolicy != velerov1.PolicyTypeUpdate {
		return nil, nil
	}
	from, err := resetMetadataAndStatus(live.DeepCopy(), true)
	if err != nil {
		return nil, err
	}
	labels := desired.GetLabels()
	withLabels := setRestoreLabels(from.DeepCopy(), labels[velerov1.RestoreNameLabel], labels[velerov1.BackupNameLabel])
	blank := setRestoreLabels(from, "", "")
	if !equality.Semantic.DeepEqual(withLabels, desired) {
		updated, err := r.mergePatch(ctx, live, blank, desired)
		if err == nil {
			return updated, nil
		}
	}
	return r.mergePatch(ctx, live, blank, withLabels)
}

// setRestoreLabels sets the restore and backup labels of obj (to "" as
// Velero's removeRestoreLabels does) and returns obj.
func setRestoreLabels(obj *unstructured.Unstructured, restore, backup string) *unstructured.Unstructured {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[velerov1.BackupNameLabel] = backup
	labels[velerov1.RestoreNameLabel] = restore
	obj.SetLabels(labels)
	return obj
}

// veleroFieldManager is the field manager the API server records for the
// Velero server's writes (its User-Agent's program name).
const veleroFieldManager = "velero-server"

// mergePatch patches target with the JSON merge patch from one to another,
// as Velero's generatePatch makes it, under Velero's field manager, and
// returns target as patched.
func (r *Restorer) mergePatch(ctx context.Context, target, from, to *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	a, err := json.Marshal(from.Object)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(to.Object)
	if err != nil {
		return nil, err
	}
	body, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("patch for %s %s/%s: %w", target.GetKind(), target.GetNamespace(), target.GetName(), err)
	}
	out := target.DeepCopy()
	if err := r.c.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), client.FieldOwner(veleroFieldManager)); err != nil {
		return nil, fmt.Errorf("updating the existing %s %s/%s: %w", target.GetKind(), target.GetNamespace(), target.GetName(), err)
	}
	return out, nil
}
