package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// ManagerLabel is the label of the initlock-manager Deployment that
// config/ installs; list and repair read the manager's settings from the
// Deployments carrying it.
const ManagerLabel = "app.kubernetes.io/name=initlock-manager"

// usedPolicy is what a command decides with: the policy, where it came
// from, and the installed managers whose scope limits what they act on.
// Print it with report.
type usedPolicy struct {
	keeper.Policy
	// source names where the policy came from, for the user.
	source string
	// managers are the installed initlock-managers; when there are any, a
	// lock none of them handles (outside their --namespace or
	// --watch-filter) gets no action. Empty when none was found or the
	// policy was given on the command line: every lock is judged.
	managers []managerScope
}

// managerScope is what one installed initlock-manager handles: its
// --namespace and --watch-filter.
type managerScope struct {
	// deployment is namespace/name of its Deployment.
	deployment  string
	namespace   string
	watchFilter string
}

// handles tells whether the manager acts on the lock of e, as its lock
// controller decides: a lock in its namespace, of a Cluster carrying its
// watch-filter label or, when the Cluster does not exist, carrying that
// label itself.
func (m managerScope) handles(e inventory.Entry) bool {
	if m.namespace != "" && e.Namespace != m.namespace {
		return false
	}
	if m.watchFilter == "" {
		return true
	}
	if e.Status.ClusterExists {
		return e.ClusterLabels[capi.WatchFilterLabel] == m.watchFilter
	}
	return e.ConfigMap != nil && e.ConfigMap.Labels[capi.WatchFilterLabel] == m.watchFilter
}

func (m managerScope) String() string {
	var flags []string
	if m.namespace != "" {
		flags = append(flags, "--namespace="+m.namespace)
	}
	if m.watchFilter != "" {
		flags = append(flags, "--watch-filter="+m.watchFilter)
	}
	if len(flags) == 0 {
		return "Deployment " + m.deployment
	}
	return fmt.Sprintf("Deployment %s (%s)", m.deployment, strings.Join(flags, " "))
}

// unhandled returns, when installed managers are known and none of them
// handles e, why its lock gets no action; "" when one does, or when no
// manager is known.
func (u usedPolicy) unhandled(e inventory.Entry) string {
	if len(u.managers) == 0 || slices.ContainsFunc(u.managers, func(m managerScope) bool { return m.handles(e) }) {
		return ""
	}
	var names []string
	for _, m := range u.managers {
		names = append(names, m.String())
	}
	return "no initlock-manager handles this cluster (" + strings.Join(names, ", ") + ")"
}

// managerPolicy returns what list and repair decide with: the settings of
// the installed initlock-manager, read from the --release-after-init,
// --orphan-grace, --namespace and --watch-filter arguments of its
// Deployment (found by ManagerLabel), so that a command never shows or
// takes an action the manager would not take. Policy flags given on the
// command line win; with both given, the Deployments are not read and every
// lock is judged. Without a Deployment, or without the right to list
// Deployments, it is the flags' defaults, and source says so. Several
// Deployments whose policies disagree are an error, unless both flags are
// given.
func (a *app) managerPolicy(ctx context.Context, cmd *cobra.Command, conn *connection, flags *policyFlags) (usedPolicy, error) {
	p, err := flags.policy()
	if err != nil {
		return usedPolicy{}, err
	}
	fs := cmd.Flags()
	setRelease, setGrace := fs.Changed("release-after-init"), fs.Changed("orphan-grace")
	if setRelease && setGrace {
		return usedPolicy{Policy: p, source: "the command line"}, nil
	}
	sel, err := labels.Parse(ManagerLabel)
	if err != nil {
		return usedPolicy{}, err
	}
	var list appsv1.DeploymentList
	if err := conn.client.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		if apierrors.IsForbidden(err) {
			return usedPolicy{Policy: p, source: `defaults and flags: the initlock-manager Deployment cannot be read (kubectl-initlock needs "list" on "deployments.apps" to find it), so its policy may differ`}, nil
		}
		return usedPolicy{}, fmt.Errorf("looking for the initlock-manager Deployment (%s): %w", ManagerLabel, err)
	}
	type found struct {
		scope  managerScope
		policy keeper.Policy
	}
	var all []found
	for _, d := range list.Items {
		s, err := settingsFromArgs(d.Spec.Template.Spec.Containers)
		if err != nil {
			return usedPolicy{}, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		if setRelease {
			s.policy.ReleaseAfterInit = p.ReleaseAfterInit
		}
		if setGrace {
			s.policy.OrphanGrace = p.OrphanGrace
		}
		s.scope.deployment = d.Namespace + "/" + d.Name
		all = append(all, found{s.scope, s.policy})
	}
	switch {
	case len(all) == 0:
		return usedPolicy{Policy: p, source: "defaults and flags: no initlock-manager Deployment found"}, nil
	case slices.ContainsFunc(all, func(f found) bool { return f.policy != all[0].policy }):
		var names []string
		for _, f := range all {
			names = append(names, fmt.Sprintf("%s (--release-after-init=%t --orphan-grace=%s)", f.scope.deployment, f.policy.ReleaseAfterInit, f.policy.OrphanGrace))
		}
		return usedPolicy{}, fmt.Errorf("initlock-manager Deployments run with different policies: %s; pass --release-after-init and --orphan-grace", strings.Join(names, ", "))
	}
	u := usedPolicy{Policy: all[0].policy}
	var names []string
	for _, f := range all {
		u.managers = append(u.managers, f.scope)
		names = append(names, f.scope.String())
	}
	u.source = strings.Join(names, ", ")
	if setRelease || setGrace {
		u.source += ", with the flags given"
	}
	return u, nil
}

// managerSettings are the arguments of an initlock-manager that decide
// what it does to a lock.
type managerSettings struct {
	policy keeper.Policy
	scope  managerScope
}

// settingsFromArgs reads --release-after-init, --orphan-grace, --namespace
// and --watch-filter from the command and arguments of the manager's
// container (the one named "manager", else the first), with the manager's
// defaults for what is not there. Flags are read as Go's flag package
// parses them: -name or --name, =value, or a separate value for a
// non-boolean flag.
func settingsFromArgs(containers []corev1.Container) (managerSettings, error) {
	s := managerSettings{policy: keeper.DefaultPolicy()}
	if len(containers) == 0 {
		return s, nil
	}
	c := containers[0]
	for _, cc := range containers {
		if cc.Name == "manager" {
			c = cc
		}
	}
	args := append(slices.Clone(c.Command), c.Args...)
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch name {
		case "release-after-init", "orphan-grace", "namespace", "watch-filter":
		default:
			continue
		}
		if strings.Contains(value, "$(") {
			return s, fmt.Errorf("argument %q refers to an environment variable, which kubectl-initlock cannot read: pass --release-after-init and --orphan-grace", arg)
		}
		if name == "release-after-init" {
			s.policy.ReleaseAfterInit = true
			if hasValue {
				b, err := strconv.ParseBool(value)
				if err != nil {
					return s, fmt.Errorf("argument %q: %w", arg, err)
				}
				s.policy.ReleaseAfterInit = b
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return s, fmt.Errorf("argument %q has no value", arg)
			}
			i++
			value = args[i]
		}
		switch name {
		case "orphan-grace":
			d, err := time.ParseDuration(value)
			if err != nil {
				return s, fmt.Errorf("argument %q: %w", arg, err)
			}
			s.policy.OrphanGrace = d
		case "namespace":
			s.scope.namespace = value
		case "watch-filter":
			s.scope.watchFilter = value
		}
	}
	return s, nil
}

// report tells the user which policy is used and where it comes from.
func (u usedPolicy) report(a *app) {
	_, _ = fmt.Fprintf(a.opts.IOStreams.ErrOut, "Using the policy of %s: --release-after-init=%t --orphan-grace=%s\n", u.source, u.ReleaseAfterInit, u.OrphanGrace)
}
