package clisuite

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// runAs runs a command with kubeconfig, a user's.
func runAs(t *testing.T, kubeconfig string, args ...string) Result {
	t.Helper()
	return Execute(t, cli.Options{}, append(args, "--kubeconfig", kubeconfig)...)
}

// A user who may read Clusters and Machines but not list ConfigMaps is
// told which permission is missing.
func TestListWithoutPermissionNamesIt(t *testing.T) {
	b := apiServer()
	ns := b.Namespace(t)
	b.held(t, ns, "c1", false)
	kubeconfig := userWith(t, b, ns, "initlock-cli-no-list", "get")

	r := runAs(t, kubeconfig, "list", "-n", ns).ExpectCode(t, cli.ExitError)
	want := `error: listing configmaps in namespace "` + ns + `": permission denied: kubectl-initlock needs "list" on "configmaps" (API group "") in namespace "` + ns +
		`"; ask an administrator to bind a Role in that namespace that grants it (check with 'kubectl auth can-i list configmaps -n ` + ns + `')`
	if !strings.HasPrefix(r.Err, want) {
		t.Errorf("stderr:\n%s\nwant prefix:\n%s", r.Err, want)
	}

	// All namespaces need a ClusterRole; the first list refused is the
	// Clusters'.
	runAs(t, kubeconfig, "list", "-A").ExpectCode(t, cli.ExitError).
		ErrHas(t, `needs "list" on "clusters" (API group "cluster.x-k8s.io") in all namespaces; ask an administrator to bind a ClusterRole`)
}

// A user who may read everything but not write is told, by repair and by
// release, which permission is missing.
func TestRepairAndReleaseWithoutWritePermission(t *testing.T) {
	b := apiServer()
	ns := b.Namespace(t)
	b.unowned(t, ns, "c1")
	cl := b.newCluster(t, ns, "c2", true)
	b.newLock(t, ns, "c2", "m2", cl)

	kubeconfig := userWith(t, b, ns, "initlock-cli-read-only", "get", "list")
	runAs(t, kubeconfig, "list", "-n", ns).ExpectCode(t, cli.ExitOK)
	runAs(t, kubeconfig, "repair", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).ErrHas(t,
		`configmap "c1-lock": adopt: permission denied: kubectl-initlock needs "patch" on "configmaps" in namespace "`+ns+`"`,
		`configmap "c2-lock": release: permission denied: kubectl-initlock needs "delete" on "configmaps"`)
	runAs(t, kubeconfig, "release", "c2", "-n", ns, "--yes").ExpectCode(t, cli.ExitError).
		ErrHas(t, `kubectl-initlock needs "get" and "patch" on "clusters.cluster.x-k8s.io" (to empty the grant register) and "delete" on "configmaps"`)
}

// userWith writes the kubeconfig of a new user who may get and list the
// Clusters and Machines of namespace ns, and use configMapVerbs on its
// ConfigMaps, and nothing else: no write unless configMapVerbs holds it,
// and no read of the lock guard's admission policies.
func userWith(t *testing.T, b *Backend, ns, user string, configMapVerbs ...string) string {
	t.Helper()
	kubeconfig, err := env.WriteKubeconfig(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{capi.Group}, Resources: []string{"clusters", "machines"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: configMapVerbs},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{kubeenv.UserSubject(user)},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := b.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return kubeconfig
}
