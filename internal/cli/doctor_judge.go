package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/initlock/initlock/internal/lockguard"
)

// The fixes that internal/lockguard's reasons end with, and the install
// that holds config/protection.
const (
	guardFixReplace = "delete it and apply config/protection from the release"
	guardFixApply   = "apply config/protection from the release"
	installHint     = "kubectl apply --server-side -f install.yaml of the release"
)

// unknownRemedy is the remedy of a check whose facts could not be read
// because of err: the permission its detail names, or a new try.
func unknownRemedy(err error) string {
	if apierrors.IsForbidden(err) {
		return "ask an administrator for the permission named, then run kubectl initlock doctor again"
	}
	return "run kubectl initlock doctor again once the API server answers"
}

func unknownCheck(name string, err error) DoctorCheck {
	return DoctorCheck{Name: name, Status: CheckUnknown, Detail: err.Error(), Remedy: unknownRemedy(err)}
}

// judgeGuard judges lockguard.Check's answer err on the lock guard called
// name: in force, not in force (the object at fault, and its fix), or
// unknown.
func judgeGuard(name string, err error) DoctorCheck {
	c := DoctorCheck{Name: "lock-guard"}
	switch {
	case err == nil:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("%s is in force: its policy is the one initlock ships, its binding denies every request the policy matches", name)
	case errors.Is(err, lockguard.ErrNotInForce):
		c.Status = CheckFail
		c.Detail = strings.TrimPrefix(err.Error(), lockguard.ErrNotInForce.Error()+": ")
		switch {
		case meta.IsNoMatchError(err):
			c.Remedy = "upgrade the management cluster to Kubernetes v1.30 or later, then " + guardFixApply + " (" + installHint + ")"
		case strings.HasSuffix(c.Detail, ": "+guardFixReplace):
			c.Detail = strings.TrimSuffix(c.Detail, ": "+guardFixReplace)
			kind, object, _ := strings.Cut(c.Detail, " ")
			object, _, _ = strings.Cut(object, " ")
			c.Remedy = fmt.Sprintf("kubectl delete %s %s, then %s (%s)", strings.ToLower(kind), object, guardFixApply, installHint)
		default:
			c.Detail = strings.TrimSuffix(c.Detail, ": "+guardFixApply)
			c.Remedy = guardFixApply + " (" + installHint + ")"
		}
	case apierrors.IsForbidden(err):
		c.Status = CheckUnknown
		c.Detail = `the lock guard cannot be read: kubectl-initlock needs "get" on "validatingadmissionpolicies" and "validatingadmissionpolicybindings" (API group "admissionregistration.k8s.io")`
		c.Remedy = "ask an administrator to bind a ClusterRole that grants it (check with 'kubectl auth can-i get validatingadmissionpolicies'), then run kubectl initlock doctor again"
	default:
		return unknownCheck(c.Name, err)
	}
	return c
}

// judgeCollector judges whether the garbage collector is kept from held
// locks. The lock guard refuses every delete of a held lock that names a
// propagation policy, which every delete of the collector does, whatever
// user it runs as: it is kept out exactly when the lock guard is in force.
func judgeCollector(guardErr error) DoctorCheck {
	c := DoctorCheck{Name: "garbage-collector"}
	switch {
	case guardErr == nil:
		c.Status = CheckOK
		c.Detail = "kept out: the lock guard refuses every delete of a held lock that names a propagation policy, as all the collector's do, whatever its user"
	case errors.Is(guardErr, lockguard.ErrNotInForce):
		c.Status = CheckFail
		c.Detail = "the lock guard is not in force, so the garbage collector deletes a held lock whose Cluster ownerReference names an old UID (a restore, a copy)"
		c.Remedy = "put the lock guard in force (see lock-guard): it keeps the collector out whatever user the collector runs as"
	default:
		c.Status = CheckUnknown
		c.Detail = "whether the garbage collector is kept from held locks is the lock guard's, which cannot be read"
		c.Remedy = "see lock-guard"
	}
	return c
}

// judgeManager judges the manager's Deployment: it exists and its replicas
// are available.
func judgeManager(m managerFacts) DoctorCheck {
	c := DoctorCheck{Name: "manager"}
	ref := fmt.Sprintf("Deployment %s/%s", m.namespace, m.name)
	d := m.deployment
	switch {
	case m.err != nil:
		return unknownCheck(c.Name, m.err)
	case d == nil:
		c.Status, c.Detail = CheckFail, ref+" not found: no lock is healed, released or collected"
		c.Remedy = "install initlock-manager (" + installHint + "), or name its Deployment with --manager-namespace and --manager-deployment"
		return c
	case d.DeletionTimestamp != nil:
		c.Status, c.Detail = CheckFail, ref+" is being deleted"
		c.Remedy = "install initlock-manager again (" + installHint + ")"
		return c
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	got := d.Status.AvailableReplicas
	logs := fmt.Sprintf("kubectl -n %s describe deployment %s, and kubectl -n %s logs deployment/%s", m.namespace, m.name, m.namespace, m.name)
	switch {
	case want == 0:
		c.Status, c.Detail = CheckFail, ref+" is scaled to 0 replicas: no lock is healed, released or collected"
		c.Remedy = fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=1", m.namespace, m.name)
	case got == 0:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("%s has 0 of %d replicas available: no lock is healed, released or collected", ref, want)
		c.Remedy = logs
	case got < want:
		c.Status, c.Detail = CheckWarn, fmt.Sprintf("%s has %d of %d replicas available", ref, got, want)
		c.Remedy = logs
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s has %d of %d replicas available", ref, got, want)
	}
	return c
}

// skippedWithoutManager is a check that needs the manager's Deployment,
// which is missing or could not be read.
func skippedWithoutManager(name string, m managerFacts) DoctorCheck {
	detail := fmt.Sprintf("no Deployment %s/%s to read (see manager)", m.namespace, m.name)
	if m.err != nil {
		detail = fmt.Sprintf("Deployment %s/%s could not be read (see manager)", m.namespace, m.name)
	}
	return DoctorCheck{Name: name, Status: CheckSkipped, Detail: detail}
}

// judgeManagerVersion compares the tag of the manager's image with
// kubectl-initlock's version.
func judgeManagerVersion(m managerFacts, cli string) DoctorCheck {
	const name = "manager-version"
	if m.deployment == nil {
		return skippedWithoutManager(name, m)
	}
	ctr, _ := managerContainer(m.deployment.Spec.Template.Spec.Containers)
	v := compareVersion(ctr.Image, cli)
	c := DoctorCheck{Name: name, Status: v.status, Detail: fmt.Sprintf("%s (image %s)", v.why, shortImage(ctr.Image))}
	switch {
	case v.status == CheckFail || v.patch:
		c.Remedy = fmt.Sprintf("upgrade initlock-manager to %s (docs/install.md#upgrading), or use the kubectl-initlock of %s", cli, v.tag)
	case v.status == CheckWarn:
		c.Remedy = v.remedy
	}
	return c
}

// judgeLeader judges the manager's leader-election Lease at now: held,
// and renewed within twice its lease duration (a leader renews well within
// one; the second allows for the skew between this clock and the
// manager's).
func judgeLeader(m managerFacts, now time.Time) DoctorCheck {
	const name = "manager-leader"
	if m.deployment == nil {
		return skippedWithoutManager(name, m)
	}
	l := m.lease
	ref := fmt.Sprintf("Lease %s/%s", l.namespace, l.name)
	logs := fmt.Sprintf("kubectl -n %s logs deployment/%s shows why no replica leads", m.namespace, m.name)
	c := DoctorCheck{Name: name}
	switch {
	case l.off:
		replicas := int32(1)
		if r := m.deployment.Spec.Replicas; r != nil {
			replicas = *r
		}
		c.Status, c.Detail = CheckOK, "leader election is off (no --leader-elect): the one replica acts"
		if replicas > 1 {
			c.Status, c.Detail = CheckWarn, fmt.Sprintf("leader election is off (no --leader-elect), with %d replicas: each acts on its own", replicas)
			c.Remedy = "add --leader-elect to the manager's arguments, as config/ installs it"
		}
		return c
	case l.err != nil:
		return unknownCheck(name, l.err)
	case l.lease == nil:
		c.Status, c.Detail, c.Remedy = CheckFail, ref+" not found: no replica has become leader, so none acts", logs
		return c
	}
	spec := l.lease.Spec
	holder := ""
	if spec.HolderIdentity != nil {
		holder = *spec.HolderIdentity
	}
	lease := 15 * time.Second
	if spec.LeaseDurationSeconds != nil {
		lease = time.Duration(*spec.LeaseDurationSeconds) * time.Second
	}
	switch {
	case holder == "":
		c.Status, c.Detail, c.Remedy = CheckFail, ref+" is held by no replica, so none acts", logs
	case spec.RenewTime == nil:
		c.Status, c.Detail, c.Remedy = CheckFail, fmt.Sprintf("%s names %s, which never renewed it", ref, holder), logs
	default:
		age := max(now.Sub(spec.RenewTime.Time), 0)
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s held by %s, renewed %s ago", ref, holder, duration.HumanDuration(age))
		if age > 2*lease {
			c.Status = CheckFail
			c.Detail = fmt.Sprintf("%s names %s, which last renewed it %s ago (lease duration %s): the leader stopped", ref, holder, duration.HumanDuration(age), lease)
			c.Remedy = fmt.Sprintf("kubectl -n %s logs deployment/%s; another replica takes the Lease over once it expires", m.namespace, m.name)
		}
	}
	return c
}
