package managersuite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/test/managertest"
)

// managerUser is the user the restricted manager runs as.
const managerUser = "initlock-manager"

// TestRestrictedRBAC runs the manager as a user bound only to the generated
// ClusterRole and Role of config/rbac, watching all namespaces with leader
// election, and checks that adoption, release, orphan collection and the
// warnings work without a single refused request, that the user holds no
// right beyond them, that the health endpoints serve, and that the HTTPS
// metrics endpoint serves a token bound to config/rbac's metrics-reader
// ClusterRole and refuses others.
func TestRestrictedRBAC(t *testing.T) {
	system := env.Namespace(t) // the manager's own namespace
	ns := env.Namespace(t)
	cfg, uc := bindRoles(t, system)

	opts := testOptions("")
	opts.LeaderElection = true
	opts.LeaderElectionNamespace = system
	opts.OrphanGrace, opts.OrphanSettle = 2*time.Second, 0
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = kubeenv.FreeAddress(t), kubeenv.FreeAddress(t)
	opts.MetricsSecure = true

	// Adoption: an unowned lock; release: an initialised Cluster; orphan:
	// a lock without Cluster or Machine; foreign: an unlabelled ConfigMap.
	create(t, lockFor(ns, "adopt", "adopt-cp-0", nil))
	createMachine(t, v, ns, "adopt", "adopt-cp-0")
	adopt := createCluster(t, v, ns, "adopt")
	create(t, lockFor(ns, "init", "init-cp-0", nil))
	createMachine(t, v, ns, "init", "init-cp-0")
	if err := kubeenv.SetInitialized(t.Context(), env.Client, createCluster(t, v, ns, "init")); err != nil {
		t.Fatal(err)
	}
	create(t, lockFor(ns, "orphan", "orphan-cp-0", nil))
	foreign := lockFor(ns, "foreign", "foreign-cp-0", nil)
	foreign.Labels = nil
	create(t, foreign)
	createCluster(t, v, ns, "foreign")

	rm := startManager(t, cfg, opts)
	kubeenv.Eventually(t, 30*time.Second, lockIs(t, ns, "adopt", ownedBy(adopt)))
	kubeenv.Eventually(t, 30*time.Second, lockGone(t, ns, "init"))
	kubeenv.Eventually(t, 30*time.Second, lockGone(t, ns, "orphan"))
	eventOn(t, ns, "LockAdopted", "Cluster", "adopt")
	eventOn(t, ns, "LockReleased", "Cluster", "init")
	eventOn(t, ns, "OrphanLockCollected", "ConfigMap", "orphan-lock")
	eventOn(t, ns, "ForeignConfigMap", "Cluster", "foreign")
	if h := leaseHolder(t, system, opts.LeaderElectionID); h == "" {
		t.Fatalf("leader-election lease has no holder")
	}
	// adopt: patch; init: the release mark, the delete; orphan: its
	// absence, the release mark, the delete.
	wantWrites(t, rm, "configmaps", ns, 6, "")
	if d := rm.Counter.Denied(); len(d) > 0 {
		t.Fatalf("requests refused to the manager's user: %v", d)
	}

	// Health and metrics.
	for _, path := range []string{"/healthz", "/readyz"} {
		managertest.GetOK(t, 10*time.Second, "http://"+opts.HealthProbeBindAddress+path, "")
	}
	body := scrapeMetrics(t, system, opts.MetricsBindAddress)
	for _, want := range []string{
		"initlock_locks{state=\"healthy\"}", "initlock_lock_adoptions_total",
		"initlock_lock_releases_total{reason=\"initialized\"}", "initlock_orphan_locks_collected_total",
		"initlock_lock_hold_duration_seconds_bucket", "initlock_lock_warnings_total{reason=\"ForeignConfigMap\"}",
		"initlock_build_info{goversion=",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	// Nothing more than needed.
	for _, tc := range []struct {
		what string
		do   func(context.Context) error
	}{
		// Secrets are opt-in (config/relink-secrets): no access at all by
		// default.
		{"get a secret", func(ctx context.Context) error {
			return uc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "any"}, &corev1.Secret{})
		}},
		{"list secrets", func(ctx context.Context) error {
			return uc.List(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}, client.InNamespace(ns))
		}},
		{"delete a secret", func(ctx context.Context) error {
			return uc.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "any"}})
		}},
		{"create a configmap", func(ctx context.Context) error {
			return uc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}})
		}},
		{"update a configmap", func(ctx context.Context) error {
			cm, err := getLock(t, ns, "adopt")
			if err != nil {
				return err
			}
			return uc.Update(ctx, cm)
		}},
		{"update a cluster", func(ctx context.Context) error { return uc.Update(ctx, adopt) }},
		{"create a lease outside its namespace", func(ctx context.Context) error {
			return uc.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-allowed"}})
		}},
	} {
		if err := tc.do(t.Context()); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: got %v, want Forbidden", tc.what, managerUser, err)
		}
	}
}

// bindRoles binds the ClusterRole and the Role controller-gen wrote
// (config/rbac/role.yaml), the Role in the manager's namespace system, to
// the manager's user only, and returns the user's rest.Config and client
// once RBAC lets it list ConfigMaps.
func bindRoles(t testing.TB, system string) (*rest.Config, client.Client) {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	roles, err := kubeenv.ReadObjects(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(roles) != 2 || roles[0].GetKind() != "ClusterRole" || roles[1].GetKind() != "Role" {
		t.Fatalf("role.yaml holds %d objects, want a ClusterRole and a Role", len(roles))
	}
	subject := kubeenv.UserSubject(managerUser)
	env.BindClusterRole(t, "initlock-test-"+system, kubeenv.GeneratedClusterRoleRules(t, "rbac"), subject)
	roles[1].SetNamespace(system)
	create(t, roles[1], &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: roles[1].GetName()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roles[1].GetName()},
		Subjects:   []rbacv1.Subject{subject},
	})
	cfg, err := env.AddUser(managerUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC is enforced as soon as the objects exist, but the authorizer's
	// cache may lag a moment.
	kubeenv.Eventually(t, 10*time.Second, func() error {
		return uc.List(t.Context(), &corev1.ConfigMapList{}, client.Limit(1))
	})
	return cfg, uc
}
