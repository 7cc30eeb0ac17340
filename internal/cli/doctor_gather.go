package cli

import (
	"cmp"
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiversion "k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/internal/lockguard"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// defaultLeaderElectionID is initlock-manager's --leader-election-id
// default (manager.DefaultLeaderElectionID, which a test compares).
const defaultLeaderElectionID = "initlock-manager.initlock.dev"

// doctorConn is doctor's connection: unlike the other commands', it is
// made without Cluster API, which doctor reports on rather than needs.
type doctorConn struct {
	connection
	// server is the API server's version, nil when not read: a client
	// given in Options has no discovery.
	server *apiversion.Info
	// capiErr is why no Cluster API version was discovered.
	capiErr error
}

func (a *app) doctorConnect() (*doctorConn, error) {
	if a.opts.Client != nil {
		return &doctorConn{connection: connection{client: a.opts.Client, capiVersion: a.opts.CAPIVersion}}, nil
	}
	host, dc, c, err := a.dial()
	if err != nil {
		return nil, err
	}
	server, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("API server %s: %w", host, err)
	}
	version, capiErr := capi.Discover(dc)
	return &doctorConn{connection: connection{client: c, capiVersion: version}, server: server, capiErr: capiErr}, nil
}

// doctorFacts are what doctor read, for the judging functions.
type doctorFacts struct {
	cliVersion string
	now        time.Time
	// guardName is the lock guard's name, guardErr lockguard.Check's
	// answer.
	guardName string
	guardErr  error
	manager   managerFacts
	rbac      rbacFacts
	velero    veleroFacts
	kube      kubeFacts
	capi      capiFacts
	locks     locksFacts
}

// managerFacts are the manager's Deployment and leader-election Lease.
type managerFacts struct {
	namespace, name string
	// deployment is nil when there is none, or it could not be read (err).
	deployment *appsv1.Deployment
	err        error
	lease      leaseFacts
}

// leaseFacts are the Lease of the manager's leader election.
type leaseFacts struct {
	namespace, name string
	// off: the manager runs without --leader-elect.
	off   bool
	lease *coordinationv1.Lease
	err   error
}

// veleroFacts are Velero's Deployment.
type veleroFacts struct {
	namespace, name string
	deployment      *appsv1.Deployment
	err             error
}

// kubeFacts are the API server's version, "" when not read.
type kubeFacts struct{ gitVersion string }

// capiFacts are the versions clusters.cluster.x-k8s.io serves.
type capiFacts struct {
	// served and storage are the versions the CRD serves and stores;
	// source names what serves them: the CRD, or the API group when only
	// discovery found them.
	served  []string
	storage string
	source  string
	// missing: neither the CRD nor the group is served; why says why.
	missing bool
	why     error
	err     error
}

// locksFacts are the locks that need a person, of total locks.
type locksFacts struct {
	namespace string
	total     int
	person    []row
	skipped   string
	err       error
}

func (a *app) gatherDoctor(ctx context.Context, conn *doctorConn, o *doctorOptions) doctorFacts {
	f := doctorFacts{cliVersion: a.cliVersion(), now: a.clock.Now()}
	f.guardName = o.guard.name
	_, f.guardErr = lockguard.Check(ctx, conn.client, o.guard.name)
	f.manager = readManager(ctx, conn.client, o.managerNamespace, o.managerDeployment)
	f.rbac = readManagerRBAC(ctx, conn.client, f.manager.deployment)
	f.velero = readVelero(ctx, conn.client, o.veleroNamespace, o.veleroDeployment)
	if conn.server != nil {
		f.kube.gitVersion = conn.server.GitVersion
	}
	f.capi = readClusterAPI(ctx, conn)
	ns := ""
	if a.flags.Namespace != nil {
		ns = *a.flags.Namespace
	}
	f.locks = readLocks(ctx, conn, ns, f.manager.deployment, f.now)
	return f
}

func readManager(ctx context.Context, c client.Reader, ns, name string) managerFacts {
	m := managerFacts{namespace: ns, name: name}
	d, err := getDeployment(ctx, c, ns, name)
	if d == nil {
		m.err = err
		return m
	}
	m.deployment = d
	flags := readManagerFlags(d.Spec.Template.Spec.Containers)
	m.lease = leaseFacts{namespace: cmp.Or(flags.leaderElectionNamespace, ns), name: cmp.Or(flags.leaderElectionID, defaultLeaderElectionID), off: !flags.leaderElect}
	if m.lease.off {
		return m
	}
	lease := &coordinationv1.Lease{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: m.lease.namespace, Name: m.lease.name}, lease); {
	case err == nil:
		m.lease.lease = lease
	case !apierrors.IsNotFound(err):
		m.lease.err = inventory.GetError(err, "lease", "leases", coordinationv1.GroupName, m.lease.namespace, m.lease.name)
	}
	return m
}

// getDeployment reads Deployment ns/name: nil, and no error, when there is
// none.
func getDeployment(ctx context.Context, c client.Reader, ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, inventory.GetError(err, "deployment", "deployments", appsv1.GroupName, ns, name)
	}
	return d, nil
}

func readVelero(ctx context.Context, c client.Reader, ns, name string) veleroFacts {
	v := veleroFacts{namespace: ns, name: name}
	v.deployment, v.err = getDeployment(ctx, c, ns, name)
	return v
}

// clusterCRD is the CustomResourceDefinition of Cluster API's Clusters.
const clusterCRD = "clusters." + capi.Group

// readClusterAPI reads the versions the Clusters' CRD serves; when the CRD
// cannot be read but discovery found a version, that version.
func readClusterAPI(ctx context.Context, conn *doctorConn) capiFacts {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err := conn.client.Get(ctx, client.ObjectKey{Name: clusterCRD}, u)
	switch {
	case err == nil:
		f := capiFacts{source: clusterCRD}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, _ := m["served"].(bool); served {
				f.served = append(f.served, name)
			}
			if storage, _ := m["storage"].(bool); storage {
				f.storage = name
			}
		}
		return f
	case conn.capiVersion != "":
		return capiFacts{served: []string{conn.capiVersion}, source: "API group " + capi.Group + " (discovered)"}
	case apierrors.IsNotFound(err):
		return capiFacts{missing: true, why: conn.capiErr}
	}
	return capiFacts{err: inventory.GetError(err, "customresourcedefinition", "customresourcedefinitions", "apiextensions.k8s.io", "", clusterCRD)}
}

// readLocks gathers the locks of namespace ns ("" for all) as list does,
// decided with the manager's policy, and keeps those that need a person.
func readLocks(ctx context.Context, conn *doctorConn, ns string, manager *appsv1.Deployment, now time.Time) locksFacts {
	f := locksFacts{namespace: ns}
	if conn.capiVersion == "" {
		f.skipped = "Cluster API is not served, so there are no locks to judge"
		return f
	}
	policy := keeper.DefaultPolicy()
	if manager != nil {
		if s, err := settingsFromArgs(manager.Spec.Template.Spec.Containers); err == nil {
			policy = s.policy
		}
	}
	inv, err := inventory.Gather(ctx, conn.client, inventory.Options{Namespace: ns, CAPIVersion: conn.capiVersion, Policy: policy, Now: now})
	if err != nil {
		f.err = err
		return f
	}
	for _, e := range inv.Entries {
		if e.Status.LockExists {
			f.total++
		}
		if e.Status.Wait == "person" {
			f.person = append(f.person, row{entry: e})
		}
	}
	return f
}
