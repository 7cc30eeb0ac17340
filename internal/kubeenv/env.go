package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure an Env.
type Options struct {
	// CAPI selects the Cluster API CRDs; the default is CAPIV1Beta2.
	CAPI CAPI
	// CRDDirs are further folders of CRDs to install.
	CRDDirs []string
	// NoControllerManager leaves kube-controller-manager out: no garbage
	// collection, and deleted namespaces stay Terminating.
	NoControllerManager bool
	// AuditWrites has kube-apiserver log every write request (create,
	// update, patch, delete) at the Metadata level into AuditLogPath:
	// who wrote what, and the response code.
	AuditWrites bool
	// OwnerReferencesPermissionEnforcement turns on kube-apiserver's
	// admission plugin of that name, as OpenShift and Cluster API's
	// end-to-end clusters do: changing an object's ownerReferences needs
	// delete on the object, and setting blockOwnerDeletion needs update on
	// the owner's finalizers subresource. Off by default.
	OwnerReferencesPermissionEnforcement bool
	// LockGuard installs the lock guard the manager ships
	// (LockGuardFile), an admission policy that refuses every delete of a
	// lock that is not marked for release, and waits until the API server
	// enforces it.
	LockGuard bool
}

// Env is a running control plane.
type Env struct {
	// Config connects as a cluster admin.
	Config *rest.Config
	// Client is an uncached client for Config, with Scheme.
	Client client.Client
	// CAPIVersion is the Cluster API version the Env serves preferably
	// (v1beta2 or v1beta1), or "" without Cluster API.
	CAPIVersion string
	// Dir is a temporary folder that lives as long as the Env.
	Dir string

	env *envtest.Environment
	kcm *Process
}

// Start starts etcd and kube-apiserver, installs the CRDs, then starts
// kube-controller-manager, and returns once all of them serve.
func Start(opts Options) (_ *Env, retErr error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := CRDDirs(opts.CAPI)
	if err != nil {
		return nil, err
	}
	crds = append(crds, opts.CRDDirs...)
	dir, err := os.MkdirTemp("", "initlock-kubeenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, env: &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}}
	if opts.AuditWrites {
		if err := e.configureAudit(); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
	}
	if opts.OwnerReferencesPermissionEnforcement {
		e.env.ControlPlane.GetAPIServer().Configure().
			Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		// envtest's 20 s is too short for a loaded 2-core machine.
		e.env.ControlPlaneStartTimeout = 2 * time.Minute
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.Stop())
		}
	}()
	cfg, err := e.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	// Client-side rate limiting never shapes a test.
	cfg.QPS, cfg.Burst = 1000, 2000
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}
	if opts.CAPI != CAPINone {
		e.CAPIVersion = string(opts.CAPI)
		if opts.CAPI == "" {
			e.CAPIVersion = string(CAPIV1Beta2)
		}
	}
	if opts.LockGuard {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.InstallLockGuard(ctx); err != nil {
			return nil, err
		}
	}
	if !opts.NoControllerManager {
		if err := e.startControllerManager(filepath.Join(assets, "kube-controller-manager")); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// CollectorUser is the user the test kit's kube-controller-manager (its
// garbage collector and namespace controller) runs as: a kubeconfig user
// of its own name, without the system: prefix kubeadm's clusters give it,
// so that every test on the real control plane shows that the lock guard
// keeps the collector out by what it sends, not by its name.
const CollectorUser = "kube-controller-manager"

// startControllerManager runs the garbage collector and the namespace
// controller as a cluster admin under CollectorUser. It is started after
// the CRDs are installed, since the collector rediscovers resource types
// only every 30 s or so.
func (e *Env) startControllerManager(bin string) error {
	kubeconfig, err := e.WriteKubeconfig(CollectorUser, []string{"system:masters"})
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers=garbage-collector-controller,namespace-controller",
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
	)
	if e.kcm, err = StartLogged("kube-controller-manager", cmd, filepath.Join(e.Dir, "kube-controller-manager.log")); err != nil {
		return err
	}
	// Healthy once it runs: the collector syncs on its own schedule, and
	// tests wait for its effects with Eventually.
	select {
	case <-e.kcm.Done():
		return fmt.Errorf("kube-controller-manager exited at start:\n%s", e.kcm.Log())
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

// auditPolicy logs writes at the Metadata level and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func (e *Env) configureAudit() error {
	policy := filepath.Join(e.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	e.env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", e.AuditLogPath())
	return nil
}

// AuditLogPath is the file kube-apiserver writes its audit log to, with
// Options.AuditWrites: one JSON audit.k8s.io/v1 Event a line.
func (e *Env) AuditLogPath() string { return filepath.Join(e.Dir, "audit.log") }

// AddUser returns a rest.Config for a user of the given name and groups, with
// the same QPS as the admin config. RBAC decides what the user may do.
func (e *Env) AddUser(name string, groups []string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("adding user %q: %w", name, err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg, nil
}

// WriteKubeconfig adds a user and writes a kubeconfig for it into the Env's
// folder, returning its path.
func (e *Env) WriteKubeconfig(name string, groups []string) (string, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return "", fmt.Errorf("adding user %q: %w", name, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.Dir, name+".kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// Stop ends kube-controller-manager, kube-apiserver and etcd and removes the
// Env's temporary folders. It may be called more than once.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil {
		e.kcm.Stop()
		e.kcm = nil
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
		}
		e.env = nil
	}
	if e.Dir != "" {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
		e.Dir = ""
	}
	return errors.Join(errs...)
}
