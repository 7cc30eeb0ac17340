package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// The relinker (internal/relink) on an object a restore brought back:
// ConfigMap relinkedName, labelled with Cluster c1 and with the restore,
// recording the Machines of Scenario.Relink, restored by the same restore,
// as its owners. The relinker watches ConfigMaps only, so it reads the
// Machines live, and it reconciles the ConfigMap once.

const (
	relinkerActor = "relinker"
	relinkedName  = "c1-addons"
	restoreName   = "restore-1"
)

// InvRelinkConfirmed is the relinker's rule: it writes an owner's UID only
// as its last live read of that owner found it, and sends no request
// between that read's answer and the patch (relinkApplied).
const InvRelinkConfirmed = "relink-confirmed"

var relinkedKey = apimodel.Key{Kind: "ConfigMap", Namespace: namespace, Name: relinkedName}

// setUpRelink creates the restored owners and the ConfigMap recording them.
func (s *System) setUpRelink() {
	var owners []relink.OwnerRef
	for _, name := range s.sc.Relink {
		m := kubeenv.NewMachine("v1beta2", namespace, clusterName, name)
		m.SetLabels(map[string]string{capi.ClusterNameLabel: clusterName, velerov1.RestoreNameLabel: restoreName})
		s.mustCreate(machineKey(name), m.Object)
		owners = append(owners, relink.OwnerRef{APIVersion: apimodel.MachineGVK.GroupVersion().String(), Kind: "Machine", Name: name,
			UID: types.UID("backup-" + name)})
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"addons": "cni"}}}
	cm.SetNamespace(namespace)
	cm.SetName(relinkedName)
	cm.SetLabels(map[string]string{capi.ClusterNameLabel: clusterName, velerov1.RestoreNameLabel: restoreName})
	cm.SetAnnotations(map[string]string{relink.Annotation: relink.Encode(owners)})
	s.mustCreate(relinkedKey, cm.Object)
}

// relinker is initlock-manager's relinker reconciling the restored
// ConfigMap once, through relink.NewForClient: it reads the ConfigMap and
// its Cluster where the manager's relinker reads its cache, and the owners
// and its patch go to the API server.
func (s *System) relinker(ctx context.Context) {
	defer s.actorDone(relinkerActor)
	r, err := relink.NewForClient(relink.Options{
		Kinds:    []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}},
		Registry: prometheus.NewRegistry(),
		Clock:    clocktesting.NewFakeClock(start),
	}, s.client(relinkerActor), &kubeenv.Recorder{})
	if err != nil {
		panic(fmt.Sprintf("explore: the relinker: %v", err))
	}
	s.wait(relinkerActor, "reconcile")
	_, _ = r.Reconcile(ctx, relink.Request{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		NamespacedName: types.NamespacedName{Namespace: namespace, Name: relinkedName}})
}

// deleteOwnerEvents delete an owner the restored ConfigMap records, as a
// person does; the garbage collector would delete the ConfigMap once it
// references none but deleted owners.
func (s *System) deleteOwnerEvents(sn snapshot) []*event {
	var out []*event
	for _, name := range s.sc.Relink {
		if sn.machines[name] == nil {
			continue
		}
		out = append(out, &event{name: "machine " + name + ", an owner the restored ConfigMap records, is deleted", kind: DeleteOwner, cost: costOf(DeleteOwner),
			run: func(s *System) { _ = s.store.Delete(machineKey(name), nil, nil) }})
	}
	return out
}

// relinkRead is the relinker's last read of an owner: the UID it found
// ("" for none), and how many requests the relinker has sent since its
// answer.
type relinkRead struct {
	uid   types.UID
	since int
}

// relinkReadOf notes the relinker's read of Machine name: obj, nil when it
// was not found.
func (c *checker) relinkReadOf(name string, obj map[string]any) {
	if c.relinkReads == nil {
		c.relinkReads = map[string]relinkRead{}
	}
	c.relinkReads[name] = relinkRead{uid: types.UID(uidOf(obj))}
}

// relinkIssued notes a request the relinker sends: a patch of the restored
// ConfigMap keeps the owners' reads as they stand (relinkApplied judges
// them), and every request counts against the reads answered before it.
func (c *checker) relinkIssued(r *apimodel.Request) {
	if r.Verb == "patch" && r.Key == relinkedKey {
		if c.relinkPatches == nil {
			c.relinkPatches = map[*apimodel.Request]map[string]relinkRead{}
		}
		c.relinkPatches[r] = maps.Clone(c.relinkReads)
	}
	for name, rd := range c.relinkReads {
		rd.since++
		c.relinkReads[name] = rd
	}
}

// relinkApplied judges the relinker's patch of the restored ConfigMap, once
// applied (InvRelinkConfirmed): every owner UID it adds is the one the
// relinker's last read of that owner found, and the relinker sent no
// request between that read's answer and the patch. Time does not pass
// here, so no answer is ever ConfirmFor old and no owner is read again:
// the window internal/relink states is then no request at all. An owner
// deleted within it (after its read, before the patch is applied) is
// written: the window stated.
func (c *checker) relinkApplied(s *System, r *apimodel.Request) {
	reads := c.relinkPatches[r]
	delete(c.relinkPatches, r)
	h := s.store.History(relinkedKey)
	if len(h) < 2 {
		return
	}
	before := (&unstructured.Unstructured{Object: h[len(h)-2].Object}).GetOwnerReferences()
	for _, ref := range (&unstructured.Unstructured{Object: h[len(h)-1].Object}).GetOwnerReferences() {
		if slices.ContainsFunc(before, func(b metav1.OwnerReference) bool { return b.UID == ref.UID }) {
			continue
		}
		rd, ok := reads[ref.Name]
		switch {
		case !ok:
			c.violate(InvRelinkConfirmed, "the relinker wrote owner %s of uid %s without reading it live", ref.Name, ref.UID)
		case rd.uid != ref.UID:
			c.violate(InvRelinkConfirmed, "the relinker wrote owner %s of uid %s, which its last read of it did not find (it found %q)", ref.Name, ref.UID, rd.uid)
		case rd.since > 0:
			gone := ""
			if s.store.Peek(machineKey(ref.Name)) == nil {
				gone = " (deleted since: the garbage collector would delete the ConfigMap)"
			}
			c.violate(InvRelinkConfirmed, "the relinker sent %d requests between the answer to its read of owner %s and the patch that wrote it%s", rd.since, ref.Name, gone)
		}
	}
}

// relinkState is what of the relinker's reads the checker's future
// depends on.
func (c *checker) relinkState() []string {
	var lines []string
	for name, rd := range c.relinkReads {
		lines = append(lines, fmt.Sprintf("relink read %s %s since %d", name, rd.uid, rd.since))
	}
	for _, reads := range c.relinkPatches {
		for name, rd := range reads {
			lines = append(lines, fmt.Sprintf("relink patch on read %s %s since %d", name, rd.uid, rd.since))
		}
	}
	return lines
}
