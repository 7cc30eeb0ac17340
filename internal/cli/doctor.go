package cli

import (
	"github.com/spf13/cobra"
)

// Where config/ installs initlock-manager, and where "velero install"
// installs Velero; doctor's flags change them.
const (
	defaultManagerNamespace  = "initlock-system"
	defaultManagerDeployment = "initlock-controller-manager"
	defaultVeleroNamespace   = "velero"
	defaultVeleroDeployment  = "velero"
)

// doctorOutputs are the output formats doctor takes besides the table.
var doctorOutputs = []string{outputJSON, outputYAML}

type doctorOptions struct {
	output            string
	guard             guardFlag
	managerNamespace  string
	managerDeployment string
	veleroNamespace   string
	veleroDeployment  string
}

func (a *app) newDoctorCommand() *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [-o table|json|yaml] [--manager-namespace NAMESPACE] [--velero-namespace NAMESPACE]",
		Short: "Check that initlock is installed and working, with a remedy for each failure",
		Long: `Doctor checks, in one read-only pass, what initlock needs to keep init locks
safe, and prints one line per check: ok, warn, fail, unknown (what it needs
cannot be read) or skipped (it needs what another check found missing). A
check that fails or is unknown says what to do in one line.

  lock-guard           the ValidatingAdmissionPolicy initlock-lock-guard and
                       its binding are in force: the policy as initlock ships
                       it, the binding with Deny and no selector or rule that
                       keeps a lock from it (the check of list and of the
                       manager; --lock-guard names it).
  garbage-collector    the lock guard refuses every delete that names a
                       propagation policy, as the garbage collector's do,
                       whatever user the collector runs as: this fails only
                       when the lock guard is not in force.
  manager              the Deployment of initlock-manager
                       (--manager-namespace, --manager-deployment) exists and
                       has its replicas available.
  manager-version      the tag of its image is kubectl-initlock's version: a
                       patch release apart warns, another release fails, an
                       image named by digest alone warns (its version cannot
                       be read).
  manager-leader       the leader-election Lease its arguments name
                       (--leader-election-id, --leader-election-namespace) is
                       held, and was renewed within twice its lease duration.
  manager-rbac         the roles bound to its ServiceAccount grant every rule
                       of config/rbac/role.yaml (and of
                       config/relink-secrets with --relink-secrets).
  velero-plugin        Velero's Deployment (--velero-namespace,
                       --velero-deployment) has initlock's plugin among its
                       init containers, at kubectl-initlock's version. Velero
                       not installed is a warning; Velero without the plugin
                       fails, since its restores then leave objects unlinked.
  kubernetes-version   the API server is Kubernetes v1.30 or later.
  cluster-api-version  clusters.cluster.x-k8s.io serves v1beta2 (Cluster API
                       v1.11 or later) or v1beta1 (up to v1.10, kubectl
                       install only).
  locks                no init lock needs a person (corrupt, conflict,
                       foreign), in all namespaces, or in the one -n names.

It writes nothing. -o json and -o yaml print a DoctorReport (apiVersion
initlock.dev/v1alpha1).

Exit codes: 0 when every check is ok, a warning or skipped; 1 when doctor
cannot run (no kubeconfig, API server unreachable); 2 when a check failed or
is unknown.`,
		Example: `  kubectl initlock doctor
  kubectl initlock doctor -o json | jq '.checks[] | select(.status != "ok")'
  kubectl initlock doctor --manager-namespace capi-system --velero-namespace backup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDoctor(cmd, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.output, "output", "o", "", "Output format: table (default), json or yaml.")
	fs.StringVar(&o.managerNamespace, "manager-namespace", defaultManagerNamespace, "Namespace of the initlock-manager Deployment.")
	fs.StringVar(&o.managerDeployment, "manager-deployment", defaultManagerDeployment, "Name of the initlock-manager Deployment.")
	fs.StringVar(&o.veleroNamespace, "velero-namespace", defaultVeleroNamespace, "Namespace of Velero's Deployment.")
	fs.StringVar(&o.veleroDeployment, "velero-deployment", defaultVeleroDeployment, "Name of Velero's Deployment.")
	o.guard.add(fs)
	return cmd
}

func (a *app) runDoctor(cmd *cobra.Command, o *doctorOptions) error {
	if err := validOutput(o.output, doctorOutputs); err != nil {
		return err
	}
	conn, err := a.doctorConnect()
	if err != nil {
		return err
	}
	facts := a.gatherDoctor(cmd.Context(), conn, o)
	report := newDoctorReport(facts.cliVersion, judgeDoctor(facts))
	out := cmd.OutOrStdout()
	switch o.output {
	case outputJSON:
		err = printJSON(out, report)
	case outputYAML:
		err = printYAML(out, report)
	default:
		err = printDoctor(out, report, a.useColour(out))
	}
	if err != nil {
		return err
	}
	if !report.Healthy {
		return &ExitCodeError{Code: ExitChecksFailed}
	}
	return nil
}

// judgeDoctor judges every fact, one check each, in the order doctor
// prints them.
func judgeDoctor(f doctorFacts) []DoctorCheck {
	return []DoctorCheck{
		judgeGuard(f.guardName, f.guardErr),
		judgeCollector(f.guardErr),
		judgeManager(f.manager),
		judgeManagerVersion(f.manager, f.cliVersion),
		judgeLeader(f.manager, f.now),
		judgeRBAC(f.rbac),
		judgeVelero(f.velero, f.cliVersion),
		judgeKubernetes(f.kube),
		judgeClusterAPI(f.capi),
		judgeLocks(f.locks),
	}
}

// cliVersion is the version of kubectl-initlock, as its version command
// prints it.
func (a *app) cliVersion() string {
	if a.opts.Version != "" {
		return a.opts.Version
	}
	return DefaultVersion()
}
