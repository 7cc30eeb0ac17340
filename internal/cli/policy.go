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

	"github.com/initlock/initlock/pkg/initlock/engine"
)

// ManagerLabel is the label of the initlock-manager Deployment that
// config/ installs; repair reads the policy from the Deployments carrying
// it.
const ManagerLabel = "app.kubernetes.io/name=initlock-manager"

// usedPolicy is the policy a command decides with, and where it came from.
// Print it with report.
type usedPolicy struct {
	engine.Policy
	// source names where it came from, for the user.
	source string
}

// managerPolicy returns the policy repair should decide with: that of the
// installed initlock-manager, read from the --release-after-init and
// --orphan-grace arguments of its Deployment (found by ManagerLabel), so
// that repair does not undo what the manager is configured to keep. Flags
// given on the command line win over it. Without a Deployment, or without
// the right to list Deployments, it is the flags' defaults, and source says
// so. Several Deployments that disagree are an error, unless both flags are
// given.
func (a *app) managerPolicy(ctx context.Context, cmd *cobra.Command, conn *connection, flags *policyFlags) (usedPolicy, error) {
	p, err := flags.policy()
	if err != nil {
		return usedPolicy{}, err
	}
	fs := cmd.Flags()
	setRelease, setGrace := fs.Changed("release-after-init"), fs.Changed("orphan-grace")
	if setRelease && setGrace {
		return usedPolicy{p, "the command line"}, nil
	}
	sel, err := labels.Parse(ManagerLabel)
	if err != nil {
		return usedPolicy{}, err
	}
	var list appsv1.DeploymentList
	if err := conn.client.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		if apierrors.IsForbidden(err) {
			return usedPolicy{p, `defaults and flags: the initlock-manager Deployment cannot be read (kubectl-initlock needs "list" on "deployments.apps" to find it), so its policy may differ`}, nil
		}
		return usedPolicy{}, fmt.Errorf("looking for the initlock-manager Deployment (%s): %w", ManagerLabel, err)
	}
	type found struct {
		name   string
		policy engine.Policy
	}
	var all []found
	for _, d := range list.Items {
		mp, err := policyFromArgs(d.Spec.Template.Spec.Containers)
		if err != nil {
			return usedPolicy{}, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		if setRelease {
			mp.ReleaseAfterInit = p.ReleaseAfterInit
		}
		if setGrace {
			mp.OrphanGrace = p.OrphanGrace
		}
		all = append(all, found{d.Namespace + "/" + d.Name, mp})
	}
	switch {
	case len(all) == 0:
		return usedPolicy{p, "defaults and flags: no initlock-manager Deployment found"}, nil
	case slices.ContainsFunc(all, func(f found) bool { return f.policy != all[0].policy }):
		var names []string
		for _, f := range all {
			names = append(names, fmt.Sprintf("%s (--release-after-init=%t --orphan-grace=%s)", f.name, f.policy.ReleaseAfterInit, f.policy.OrphanGrace))
		}
		return usedPolicy{}, fmt.Errorf("initlock-manager Deployments run with different policies: %s; pass --release-after-init and --orphan-grace", strings.Join(names, ", "))
	}
	var names []string
	for _, f := range all {
		names = append(names, f.name)
	}
	source := "Deployment " + strings.Join(names, ", ")
	if setRelease || setGrace {
		source += ", with the flags given"
	}
	return usedPolicy{all[0].policy, source}, nil
}

// policyFromArgs reads --release-after-init and --orphan-grace from the
// command and arguments of the manager's container (the one named
// "manager", else the first), with the manager's defaults for what is not
// there. Flags are read as Go's flag package parses them: -name or --name,
// =value, or a separate value for a duration.
func policyFromArgs(containers []corev1.Container) (engine.Policy, error) {
	p := engine.DefaultPolicy
	if len(containers) == 0 {
		return p, nil
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
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		switch name {
		case "release-after-init":
			if !hasValue {
				p.ReleaseAfterInit = true
				continue
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return p, fmt.Errorf("argument %q: %w", arg, err)
			}
			p.ReleaseAfterInit = b
		case "orphan-grace":
			if !hasValue {
				if i+1 >= len(args) {
					return p, fmt.Errorf("argument %q has no value", arg)
				}
				i++
				value = args[i]
			}
			d, err := time.ParseDuration(value)
			if err != nil {
				return p, fmt.Errorf("argument %q: %w", arg, err)
			}
			p.OrphanGrace = d
		}
	}
	return p, nil
}

// report tells the user which policy is used and where it comes from.
func (u usedPolicy) report(a *app) {
	_, _ = fmt.Fprintf(a.opts.IOStreams.ErrOut, "Using the policy of %s: --release-after-init=%t --orphan-grace=%s\n", u.source, u.ReleaseAfterInit, u.OrphanGrace)
}
