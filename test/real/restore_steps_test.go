//go:build real

package real_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/relink"
)

// The steps of docs/backup-restore.md, as its scenarios (restore_test.go)
// take them: each logs the command an operator types.

// heldNamespace starts initlock-manager in the first management cluster
// and creates there a namespace named as an operator's, capi-<suffix>, with
// a Cluster per name whose lock CABPK has given to <cluster>-cp-0
// (holdLock). The namespace is deleted when t ends.
func heldNamespace(t *testing.T, clusters ...string) string {
	t.Helper()
	startManager(t, source)
	ns := kubeenv.NamespaceName("capi")
	must(t, source.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cleanupNamespace(t, source, ns)
	for _, c := range clusters {
		holdLock(t, source, ns, c)
	}
	return ns
}

// setPaused pauses or resumes a Cluster as
// kubectl patch cluster NAME --type merge -p '{"spec":{"paused":true}}'
// does; a pause is waited for until core reports the Cluster paused, so
// that nothing of its graph changes any more.
func setPaused(t *testing.T, m *stack.Mgmt, ns, cluster string, paused bool) {
	t.Helper()
	t.Logf(`$ kubectl patch cluster %s -n %s --type merge -p '{"spec":{"paused":%t}}'`, cluster, ns, paused)
	must(t, m.SetPaused(t.Context(), ns, cluster, paused))
	if paused {
		must(t, m.WaitCondition(t.Context(), ns, cluster, "Paused"))
	}
}

// plainDelete deletes cluster's lock as a plain
// kubectl delete configmap <cluster>-lock sends it: propagationPolicy
// Background, no preconditions. It returns the API server's answer.
func plainDelete(t *testing.T, m *stack.Mgmt, ns, cluster string) error {
	t.Helper()
	t.Logf("$ kubectl delete configmap %s%s -n %s", cluster, wire.LockSuffix, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + wire.LockSuffix}}
	err := m.Client.Delete(t.Context(), cm, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsForbidden(err) {
		t.Fatal(err)
	}
	t.Logf("answer: %v", err)
	return err
}

// view is what kubectl initlock list and relinks printed after a step.
type view struct {
	// locks are list's rows by cluster, each by column.
	locks map[string]map[string]string
	// waiting are relinks' rows as "OBJECT OWNER VERDICT", sorted.
	waiting []string
}

// look runs kubectl initlock list and relinks in namespace ns of m, as the
// page tells an operator to after each step, and returns their rows.
// relinks is given the manager's --relink-kinds.
func look(t *testing.T, m *stack.Mgmt, ns, after string) view {
	t.Helper()
	t.Logf("after %s:", after)
	v := view{locks: map[string]map[string]string{}}
	table(initlockCLI(t, m, "list", "-n", ns), func(row map[string]string) { v.locks[row["CLUSTER"]] = row })
	table(initlockCLI(t, m, "relinks", "-n", ns, "--kinds", stack.ProviderRelinkKinds), func(row map[string]string) {
		v.waiting = append(v.waiting, row["OBJECT"]+" "+row["OWNER"]+" "+row["VERDICT"])
	})
	slices.Sort(v.waiting)
	return v
}

// table calls row with each row of a table kubectl initlock printed, by
// column; the last column takes the rest of the line (relinks' REASON).
func table(printed string, row func(map[string]string)) {
	var header []string
	for _, line := range strings.Split(printed, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "NAMESPACE" {
			header = f
			continue
		}
		if header == nil || len(f) < len(header) {
			continue
		}
		r := map[string]string{}
		for i, h := range header {
			r[h] = f[i]
		}
		r[header[len(header)-1]] = strings.Join(f[len(header)-1:], " ")
		row(r)
	}
}

// wantLock checks the columns of want in cluster's row of list.
func (v view) wantLock(t *testing.T, after, cluster string, want map[string]string) {
	t.Helper()
	row, ok := v.locks[cluster]
	if !ok {
		t.Errorf("after %s, kubectl initlock list shows no lock of %s", after, cluster)
		return
	}
	for _, col := range slices.Sorted(maps.Keys(want)) {
		if row[col] != want[col] {
			t.Errorf("after %s, kubectl initlock list shows %s %s %q, want %q", after, cluster, col, row[col], want[col])
		}
	}
}

// wantWaiting checks that relinks showed exactly want ("OBJECT OWNER
// VERDICT").
func (v view) wantWaiting(t *testing.T, after string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(v.waiting, want) {
		t.Errorf("after %s, kubectl initlock relinks shows %q, want %q", after, v.waiting, want)
	}
}

// healthy is list's row of a lock held by cp0 and owned by its live Cluster.
func healthy(cp0 string) map[string]string {
	return map[string]string{"HOLDER": cp0, "HOLDER-EXISTS": "yes", "OWNER": "ok", "PROTECTION": "guarded", "INITIALIZED": "no", "VERDICT": "healthy"}
}

// pending lists the restored objects of ns that wait for the relinker.
func pending(ctx context.Context, m *stack.Mgmt, ns string) ([]relink.Pending, error) {
	kinds, err := relink.ParseKinds(stack.ProviderRelinkKinds)
	if err != nil {
		return nil, err
	}
	p, _, err := relink.FindPending(ctx, m.Client, ns, kinds)
	return p, err
}

// waitLinked waits until cluster's lock carries no release mark and is
// owned by the live Cluster, and no restored object of ns waits for the
// relinker.
func waitLinked(t *testing.T, m *stack.Mgmt, ns, cluster string) {
	t.Helper()
	eventually(t, time.Minute, func(ctx context.Context) error {
		if err := lockOwned(ctx, m, ns, cluster); err != nil {
			return err
		}
		cm, err := kubeenv.GetLock(ctx, m.Client, ns, cluster)
		if err != nil {
			return err
		}
		if v, ok := cm.Annotations[wire.ReleaseAnnotation]; ok {
			return fmt.Errorf("the lock still carries the release mark %q", v)
		}
		p, err := pending(ctx, m, ns)
		if err != nil {
			return err
		}
		if len(p) > 0 {
			return fmt.Errorf("%d restored objects wait for the relinker, e.g. %s/%s", len(p), p[0].GVK.Kind, p[0].Name)
		}
		return nil
	})
}

// waitLinkedWhatIsThere waits until the relinker has linked every restored
// object of ns to the owners that are there: what still waits, waits for
// an owner the restore left out.
func waitLinkedWhatIsThere(t *testing.T, m *stack.Mgmt, ns string) {
	t.Helper()
	eventually(t, time.Minute, func(ctx context.Context) error {
		p, err := pending(ctx, m, ns)
		if err != nil {
			return err
		}
		for _, o := range p {
			for _, j := range o.Owners {
				if j.Verdict == relink.VerdictOriginal || j.Verdict == relink.VerdictSameRestore {
					return fmt.Errorf("%s/%s is not linked to %s %s yet", o.GVK.Kind, o.Name, j.Owner.Kind, j.Owner.Name)
				}
			}
		}
		return nil
	})
}

// secondRefused adds <cluster>-cp-1, a second control-plane Machine, to a
// Cluster whose lock <cluster>-cp-0 holds on a control plane not
// initialised, and checks that stock CABPK refuses it the lock and that the
// lock still names cp-0.
func secondRefused(t *testing.T, m *stack.Mgmt, ns, cluster string) string {
	t.Helper()
	cp0, cp1 := cluster+"-cp-0", cluster+"-cp-1"
	granted, after := addSecondMachine(t, m, ns, cluster, cp1)
	if granted {
		t.Errorf("CABPK granted %s the lock %s after it was created, while %s existed: %t", cp1, after.Round(time.Millisecond), cp0, machineExists(t, m, ns, cp0))
		return fmt.Sprintf("%s was granted the lock, %s after it was created", cp1, after.Round(time.Millisecond))
	}
	waitLockHeld(t, m, ns, cluster, cp0)
	return cp1 + " was refused the lock"
}

// restoreTook is how long the Velero server took for restore name, by its
// own timestamps (whole seconds), and how many warnings it reported.
func restoreTook(t *testing.T, v *stack.Velero, name string) (time.Duration, int) {
	t.Helper()
	r, err := v.Restore(t.Context(), name)
	must(t, err)
	if r.Status.StartTimestamp == nil || r.Status.CompletionTimestamp == nil {
		t.Fatalf("restore %s has no start or completion time", name)
	}
	return r.Status.CompletionTimestamp.Sub(r.Status.StartTimestamp.Time), r.Status.Warnings
}

// gone returns a check that nothing of cluster is left in ns: its lock and
// the objects of the graph kinds named after it.
func gone(m *stack.Mgmt, ns, cluster string) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := kubeenv.LockGone(ctx, m.Client, ns, cluster)(); err != nil {
			return err
		}
		left, err := m.Leftovers(ctx, ns)
		if err != nil {
			return err
		}
		left = slices.DeleteFunc(left, func(k string) bool {
			_, name, _ := strings.Cut(k, "/")
			return !strings.HasPrefix(name, cluster)
		})
		if len(left) > 0 {
			return errors.New("left: " + strings.Join(left, " "))
		}
		return nil
	}
}

// linkByHand links the Secret name to its Cluster as docs/backup-restore.md
// tells an operator to when the relinker cannot prove the owner: the
// ownerReference its annotation records, with the Cluster's UID now, and
// the annotation removed, in one merge patch.
func linkByHand(t *testing.T, m *stack.Mgmt, ns, name, cluster string) {
	t.Helper()
	ctx := t.Context()
	s := &corev1.Secret{}
	must(t, m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s))
	owners, err := relink.Decode(s.Annotations[relink.Annotation])
	must(t, err)
	c, err := m.Get(ctx, stack.ClusterGVK, ns, cluster)
	must(t, err)
	if len(owners) != 1 || owners[0].Kind != "Cluster" || owners[0].Name != cluster || c == nil {
		t.Fatalf("secret %s: want one recorded owner, Cluster %s, which exists; got %v", name, cluster, owners)
	}
	ref := metav1.OwnerReference{APIVersion: owners[0].APIVersion, Kind: "Cluster", Name: cluster, UID: c.GetUID(),
		Controller: owners[0].Controller, BlockOwnerDeletion: owners[0].BlockOwnerDeletion}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{ref},
		"annotations":     map[string]any{relink.Annotation: nil},
	}})
	must(t, err)
	t.Logf("$ kubectl patch secret %s -n %s --type merge -p '%s'", name, ns, patch)
	must(t, m.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)))
}

// wantLive checks that cluster's lock is still the live lock of UID uid,
// which a restore over it patched, and whether it carries its release mark.
func wantLive(t *testing.T, ns, cluster string, uid types.UID, marked bool) {
	t.Helper()
	cm, err := kubeenv.GetLock(t.Context(), source.Client, ns, cluster)
	must(t, err)
	if cm == nil || cm.UID != uid {
		t.Fatalf("want the live lock %s patched by the restore; got %v", uid, cm)
	}
	if got := cm.Annotations[wire.ReleaseAnnotation] == string(uid); got != marked {
		t.Errorf("the lock patched by the restore carries its release mark: %t, want %t; annotations %v", got, marked, cm.Annotations)
	}
}
