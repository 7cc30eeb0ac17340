package clisuite

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv/veleroinstall"
	"github.com/initlock/initlock/pkg/initlock"
)

// doctorInstall is initlock installed as config/ installs it, in a
// namespace of a test's own: what kubectl initlock doctor looks at.
type doctorInstall struct {
	ns string
	// manager, velero and clusterRole are the objects made; renewed is
	// when the leader last renewed its Lease.
	manager, velero *appsv1.Deployment
	clusterRole     *rbacv1.ClusterRole
	renewed         time.Time
}

// The names config/default gives the manager's objects.
const (
	doctorManager        = "initlock-controller-manager"
	doctorServiceAccount = "initlock-controller-manager"
	doctorLeaseHolder    = "initlock-controller-manager-5d8f7c9b4-x2lqp_0f4c2d1e"
	// doctorVersion is the version clisuite.Execute gives kubectl-initlock.
	doctorVersion = "v0.0.0-test"
)

// installForDoctor installs, in a namespace of t's own, what doctor checks
// (installForDoctorIn).
func (b *Backend) installForDoctor(t *testing.T) doctorInstall {
	t.Helper()
	ns := b.Namespace(t)
	return b.installForDoctorIn(t, ns, ns, ns, doctorVersion)
}

// installForDoctorIn installs what doctor checks
// beside the lock guard (which TestMain installs): the manager's
// Deployment of config/manager, available and running the image of
// version (kubectl-initlock's), its leader-election Lease renewed a moment
// ago, the ClusterRole and Role of config/rbac bound to its
// ServiceAccount, Velero's Deployment as "velero install --plugins" makes
// it with initlock's plugin of the same version, and one healthy lock: the
// manager's objects in namespace ns, Velero in veleroNS and the lock in
// locksNS. Everything cluster-scoped, and the Deployments, are gone when t
// ends.
func (b *Backend) installForDoctorIn(t *testing.T, ns, veleroNS, locksNS, version string) doctorInstall {
	t.Helper()
	cluster := b.newCluster(t, locksNS, "c1", false)
	machine := b.newMachine(t, locksNS, "c1", "m1", nil)
	if res, err := initlock.New(b.Client).Lock(t.Context(), cluster, machine); err != nil || !res.Acquired {
		t.Fatalf("Lock(m1): %+v, %v", res, err)
	}
	in := doctorInstall{ns: ns, renewed: time.Now().Truncate(time.Second)}

	manifest := readConfig[appsv1.Deployment](t, "manager/manager.yaml")[0]
	manifest.Namespace, manifest.Name = ns, doctorManager
	manifest.Spec.Template.Spec.ServiceAccountName = doctorServiceAccount
	manifest.Spec.Template.Spec.Containers[0].Image = "ghcr.io/initlock/initlock-manager:" + version + "@sha256:" + doctorDigest
	in.manager = manifest
	b.createDeployment(t, in.manager)
	b.setAvailable(t, in.manager, 1)

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "initlock-manager.initlock.dev"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(doctorLeaseHolder), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: in.renewed.Add(-time.Hour)}, RenewTime: &metav1.MicroTime{Time: in.renewed}},
	}
	b.create(t, lease)

	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: doctorServiceAccount, Namespace: ns}
	for _, cr := range readConfig[rbacv1.ClusterRole](t, "rbac/role.yaml") {
		cr.Name = "initlock-doctor-" + ns
		in.clusterRole = cr
		b.create(t, cr)
		b.create(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects: []rbacv1.Subject{subject}})
	}
	for _, role := range readConfig[rbacv1.Role](t, "rbac/role.yaml") {
		role.Namespace = ns
		b.create(t, role)
		b.create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{subject}})
	}

	in.velero = veleroinstall.Deployment(veleroNS, "velero/velero-plugin-for-aws:v1.14.3", "ghcr.io/initlock/velero-plugin-initlock:"+version)
	b.createDeployment(t, in.velero)
	return in
}

// doctorDigest is the digest the manager's image is pinned by, as the
// release's install.yaml pins it.
const doctorDigest = "4f2d8c1e9b7a6f5e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e"

// create creates obj, and deletes it when t ends if it is cluster-scoped
// (a namespaced object goes with its namespace).
func (b *Backend) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := b.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	if obj.GetNamespace() == "" {
		t.Cleanup(func() {
			if err := b.Client.Delete(context.WithoutCancel(t.Context()), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
			}
		})
	}
}

// setAvailable writes the status the Deployment controller writes once n
// replicas of d are available (the test control plane runs no Deployment
// controller).
func (b *Backend) setAvailable(t *testing.T, d *appsv1.Deployment, n int32) {
	t.Helper()
	if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n,
		UnavailableReplicas: 1 - n}
	if err := b.Client.Status().Update(t.Context(), d); err != nil {
		t.Fatalf("writing the status of Deployment %s: %v", d.Name, err)
	}
}
