package stack

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/kubeenv"
)

// ManagerUser is the user initlock-manager runs as; it has exactly the
// ClusterRole of config/rbac/role.yaml, as installed (and, under
// OwnerReferencesPermissionEnforcement, that of
// config/owner-references-enforcement).
const ManagerUser = "initlock-manager"

// ProviderRelinkKinds is the --relink-kinds of an installation that also
// relinks the kubeadm bootstrap provider's and the stack's infrastructure
// kinds, as docs/reference.md tells an operator to configure it: the default kinds
// and KubeadmConfig, LocalCluster and LocalMachine. CABPK's Secrets (the
// CA, etcd, proxy and service-account keys and the bootstrap data) are
// owned by a KubeadmConfig, which the default kinds do not cover.
const ProviderRelinkKinds = "Cluster.cluster.x-k8s.io,MachineDeployment.cluster.x-k8s.io,MachineSet.cluster.x-k8s.io," +
	"Machine.cluster.x-k8s.io,MachinePool.cluster.x-k8s.io,MachineHealthCheck.cluster.x-k8s.io,ConfigMap,Secret," +
	"KubeadmConfig.bootstrap.cluster.x-k8s.io,LocalCluster." + InfraGroup + ",LocalMachine." + InfraGroup

// GrantProviderKinds gives ManagerUser what ProviderRelinkKinds needs beyond
// config/rbac: get, list, watch and patch on KubeadmConfigs, LocalClusters
// and LocalMachines. Under OwnerReferencesPermissionEnforcement it adds what
// docs/install.md tells an operator to bind for kinds added with
// --relink-kinds: delete on those kinds and on Secrets, and update on the
// finalizers of the owners they name with blockOwnerDeletion (Clusters,
// Machines, KubeadmConfigs).
func (m *Mgmt) GrantProviderKinds(ctx context.Context) error {
	verbs := []string{"get", "list", "watch", "patch"}
	if m.opts.OwnerReferencesPermissionEnforcement {
		verbs = append(verbs, "delete")
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "initlock-relink-providers"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{KubeadmConfigGVK.Group}, Resources: []string{"kubeadmconfigs"}, Verbs: verbs},
			{APIGroups: []string{InfraGroup}, Resources: []string{"localclusters", "localmachines"}, Verbs: verbs},
		},
	}
	if m.opts.OwnerReferencesPermissionEnforcement {
		role.Rules = append(role.Rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"delete"}},
			rbacv1.PolicyRule{APIGroups: []string{MachineGVK.Group}, Resources: []string{"clusters/finalizers", "machines/finalizers"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{KubeadmConfigGVK.Group}, Resources: []string{"kubeadmconfigs/finalizers"}, Verbs: []string{"update"}},
		)
	}
	return m.bindToManager(ctx, role)
}

// GrantRelinkSecrets gives ManagerUser the opt-in ClusterRole of
// config/relink-secrets (list, watch and patch on Secrets), which
// initlock-manager --relink-secrets needs: ProviderRelinkKinds includes
// Secret, as CABPK's Secrets are part of a cluster's graph.
func (m *Mgmt) GrantRelinkSecrets(ctx context.Context) error {
	return m.bindGeneratedRole(ctx, "relink-secrets")
}

// Manager is a running initlock-manager process.
type Manager struct {
	*Proc
}

// ManagerOptions shape an initlock-manager process.
type ManagerOptions struct {
	// Args are added to its flags (e.g. --orphan-grace=5s).
	Args []string
	// NoLockGuard runs it without the lock guard, removing the guard if
	// it is installed: an installation that skipped config/protection.
	NoLockGuard bool
	// Binary runs another build of initlock-manager, e.g. an earlier
	// release to compare with; Binaries.Manager when empty.
	Binary string
	// RoleFile is the ClusterRole it is granted (Binary's own, from its
	// release); this tree's config/rbac/role.yaml when empty.
	RoleFile string
}

// StartManager runs initlock-manager, built from cmd/initlock-manager, as a
// process with its own kubeconfig and the RBAC that config/rbac grants it,
// with leader election off and its metrics and probes on free local ports.
// As config/default installs the manager with its lock guard, it installs
// the guard first (kubeenv's Env.InstallLockGuard), unless opts.NoLockGuard. It returns
// once the manager is ready. StopManager leaves the guard installed, as a
// manager that is down leaves its policy in the API server.
func (m *Mgmt) StartManager(ctx context.Context, opts ManagerOptions) (*Manager, error) {
	if m.manager != nil && !m.manager.Exited() {
		return nil, fmt.Errorf("initlock-manager already runs in %s", m.Name)
	}
	if err := m.grantManagerRole(ctx, opts.RoleFile); err != nil {
		return nil, err
	}
	guard := m.Env.InstallLockGuard
	if opts.NoLockGuard {
		guard = m.Env.UninstallLockGuard
	}
	if err := guard(ctx); err != nil {
		return nil, err
	}
	kubeconfig, err := m.Env.WriteKubeconfig(ManagerUser, nil)
	if err != nil {
		return nil, err
	}
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("initlock-manager-%d", m.managerStarts)
	m.managerStarts++
	p, err := m.startReady(ctx, name, cmp.Or(opts.Binary, m.bins.Manager), addrs[1], append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=" + addrs[0],
		// Plain HTTP; the secure endpoint is tested with the released
		// image (test/release).
		"--metrics-secure=false",
		"--health-probe-bind-address=" + addrs[1],
	}, opts.Args...))
	if err != nil {
		return nil, err
	}
	m.manager = &Manager{Proc: p}
	return m.manager, nil
}

// RemoveLockGuard deletes the lock guard's binding, then its policy, and
// returns once the API server no longer enforces it. A guard that is not
// installed is no error.
func (m *Mgmt) RemoveLockGuard(ctx context.Context) error { return m.Env.UninstallLockGuard(ctx) }

// ManagerRuns tells whether initlock-manager was started and not stopped.
func (m *Mgmt) ManagerRuns() bool { return m.manager != nil && !m.manager.Exited() }

// StopManager stops initlock-manager, if it runs.
func (m *Mgmt) StopManager() {
	if m.manager != nil {
		m.manager.Stop()
		m.manager = nil
	}
}

// grantManagerRole installs the ClusterRole of file, config/rbac/role.yaml
// when empty, and binds it to ManagerUser; under
// OwnerReferencesPermissionEnforcement, the opt-in ClusterRole of
// config/owner-references-enforcement too, as docs/install.md tells an
// operator of such a cluster to apply it.
func (m *Mgmt) grantManagerRole(ctx context.Context, file string) error {
	if file == "" {
		root, err := kubeenv.RepoRoot()
		if err != nil {
			return err
		}
		file = filepath.Join(root, "config", "rbac", "role.yaml")
	}
	if err := m.bindRoleFile(ctx, file); err != nil {
		return err
	}
	if m.opts.OwnerReferencesPermissionEnforcement {
		return m.bindGeneratedRole(ctx, "owner-references-enforcement")
	}
	return nil
}

// bindGeneratedRole installs the ClusterRole of config/<dir>/role.yaml,
// generated by make generate, and binds it to ManagerUser.
func (m *Mgmt) bindGeneratedRole(ctx context.Context, dir string) error {
	root, err := kubeenv.RepoRoot()
	if err != nil {
		return err
	}
	return m.bindRoleFile(ctx, filepath.Join(root, "config", dir, "role.yaml"))
}

// bindRoleFile installs the ClusterRole of file and binds it to
// ManagerUser.
func (m *Mgmt) bindRoleFile(ctx context.Context, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading a ClusterRole of the manager: %w", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	return m.bindToManager(ctx, role)
}

// bindToManager installs role, or sets the rules of the ClusterRole of
// that name to role's, and binds it to ManagerUser.
func (m *Mgmt) bindToManager(ctx context.Context, role *rbacv1.ClusterRole) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + ManagerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ManagerUser}},
	}
	err := m.Client.Create(ctx, role.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		cur := &rbacv1.ClusterRole{}
		if err = m.Client.Get(ctx, client.ObjectKeyFromObject(role), cur); err == nil && !equality.Semantic.DeepEqual(cur.Rules, role.Rules) {
			cur.Rules = role.Rules
			err = m.Client.Update(ctx, cur)
		}
	}
	if err != nil {
		return fmt.Errorf("installing ClusterRole %s: %w", role.Name, err)
	}
	if err := m.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding ClusterRole %s to %s: %w", role.Name, ManagerUser, err)
	}
	return nil
}
