package stack

import (
	"context"
	"errors"
	"fmt"
	"os"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Options configure a management cluster.
type Options struct {
	// Name names it in logs and errors, e.g. "source" or "target".
	Name string
	// S3 is the S3 server its Velero server stores backups in; several
	// management clusters may share one, as they share a bucket.
	S3 *S3
	// Webhooks registers the Cluster API webhooks at start.
	Webhooks bool
	// OwnerReferencesPermissionEnforcement runs kube-apiserver with that
	// admission plugin (kubeenv.Options).
	OwnerReferencesPermissionEnforcement bool
	// CABPK, when set, is the CABPK binary to run instead of the stack's
	// (make test-real passes CABPK built with docs/cabpk.patch).
	CABPK string
	// CABPKArgs are added to the command line of CABPK (e.g. the
	// --feature-gates that turn on docs/cabpk.patch's restore-safe lock).
	CABPKArgs []string
}

// Mgmt is a management cluster of the stack: a local control plane
// (kubeenv) with Cluster API's and Velero's CRDs, CAPI core and CABPK
// running as processes, and on demand a Velero server and initlock-manager.
type Mgmt struct {
	Name string
	// Env is its control plane; its audit log records every write.
	Env *kubeenv.Env
	// Client is an admin client whose scheme also knows Velero's types.
	Client client.Client
	// Dir holds its processes' logs and files.
	Dir string

	bins          Binaries
	opts          Options
	caBundle      []byte
	core, cabpk   *capiManager
	webhooks      bool
	velero        *Velero
	veleroStarts  int
	manager       *Manager
	managerStarts int
}

// StartMgmt starts a management cluster and returns once its control plane
// serves and its Cluster API managers are ready.
func StartMgmt(ctx context.Context, bins Binaries, opts Options) (_ *Mgmt, retErr error) {
	dir, err := os.MkdirTemp("", "initlock-stack-"+opts.Name+"-")
	if err != nil {
		return nil, err
	}
	m := &Mgmt{Name: opts.Name, Dir: dir, bins: bins, opts: opts}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, m.Stop())
		}
	}()
	crds, err := CRDDirs(dir)
	if err != nil {
		return nil, err
	}
	if m.Env, err = kubeenv.Start(kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2Core, CRDDirs: crds, AuditWrites: true, OwnerReferencesPermissionEnforcement: opts.OwnerReferencesPermissionEnforcement}); err != nil {
		return nil, fmt.Errorf("starting the control plane of %s: %w", opts.Name, err)
	}
	scheme := kubeenv.Scheme()
	if err := velerov1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if m.Client, err = client.New(m.Env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := m.startCAPI(ctx); err != nil {
		return nil, err
	}
	if opts.Webhooks {
		if err := m.RegisterWebhooks(ctx); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Stop stops every process of the management cluster, then its control
// plane, and removes its files. Webhook configurations are deleted first,
// so that nothing is left calling a stopped server.
func (m *Mgmt) Stop() error {
	var errs []error
	m.StopManager()
	m.StopVelero()
	if m.webhooks && m.Client != nil {
		if err := m.UnregisterWebhooks(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []*capiManager{m.core, m.cabpk} {
		if p != nil {
			p.Stop()
		}
	}
	if m.Env != nil {
		if err := m.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if os.Getenv("INITLOCK_KEEP_LOGS") == "" {
		if err := os.RemoveAll(m.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
