package clisuite

import (
	"strings"
	"testing"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// TestRelinks lists what the relinker has not linked, with the link rule's
// verdict for each recorded owner and why, reading each owner once.
func TestRelinks(t *testing.T) {
	b := apiServer()
	ns := b.Namespace(t)
	restored := func(restore string) map[string]string {
		return map[string]string{capi.ClusterNameLabel: "c1", velerov1.RestoreNameLabel: restore}
	}
	// An unrelated Cluster took c1's name; MachineSet ms-0 came back with
	// restore-1.
	unrelated := b.newCluster(t, ns, "c1", false)
	ms := kubeenv.NewMachineGroup("MachineSet", capi.V1Beta2, ns, "c1", "ms-0")
	ms.SetLabels(restored("restore-1"))
	if err := b.Client.Create(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
	owner := relinkOwner
	b.annotated(t, ns, "addons", restored("restore-1"), relink.Encode([]relink.OwnerRef{owner("Cluster", "c1", "uid-backed-up"), owner("MachineSet", "ms-0", "uid-ms")}))
	b.annotated(t, ns, "kubeconfig", restored("restore-1"), relink.Encode([]relink.OwnerRef{owner("Cluster", "c1", "uid-backed-up"), owner("Cluster", "gone", "uid-gone")}))
	b.annotated(t, ns, "broken", restored("restore-1"), `[{"kind":"Cluster"}]`)
	b.newConfigMap(t, ns, "linked", restored("restore-1"), nil, unrelated)

	counter := &kubeenv.Counter{}
	r := b.run(t, invocation{counter: counter}, "relinks", "-n", ns).ExpectCode(t, cli.ExitOK)
	uid := string(unrelated.GetUID())
	want := []string{
		"NAMESPACE OBJECT OWNER VERDICT AGE REASON",
		ns + " configmap/addons cluster.cluster.x-k8s.io/c1 unproven <age> exists with UID " + uid + ", not the backed-up UID uid-backed-up, and was not restored by restore restore-1",
		ns + " configmap/addons machineset.cluster.x-k8s.io/ms-0 same-restore <age> -",
		ns + " configmap/broken - invalid <age> invalid " + relink.Annotation + " annotation: owner 0: apiVersion \"\", kind \"Cluster\" and name \"\" must all be set",
		ns + " configmap/kubeconfig cluster.cluster.x-k8s.io/c1 unproven <age> exists with UID " + uid + ", not the backed-up UID uid-backed-up, and was not restored by restore restore-1",
		ns + " configmap/kubeconfig cluster.cluster.x-k8s.io/gone not-found <age> not found",
	}
	got := strings.Split(strings.TrimSpace(r.Out), "\n")
	for i := range got {
		f := strings.Fields(got[i])
		if i > 0 && len(f) > 4 {
			f[4] = "<age>"
		}
		got[i] = strings.Join(f, " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("relinks:\n%s\nwant:\n%s\nstderr: %s", strings.Join(got, "\n"), strings.Join(want, "\n"), r.Err)
	}
	// One live read per owner, whatever the objects naming it.
	if n := counter.Of("clusters", ns).Count("get"); n != 2 {
		t.Errorf("%d reads of Clusters, want one for c1 and one for gone:\n%s", n, counter)
	}
	if n := counter.Of("machinesets", ns).Count("get"); n != 1 {
		t.Errorf("%d reads of MachineSets, want 1", n)
	}
	expectN(t, "writes", counter.Writes(), 0)
}
