package cli

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/initlock/initlock/internal/lockguard"
)

// expectCheck reports unless got, what judged, is want.
func expectCheck(t *testing.T, what string, got, want DoctorCheck) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s =\n%+v\nwant\n%+v", what, got, want)
	}
}

// judgedGuard is lockguard.Judge's answer on the shipped guard, changed
// by change (named as the file names it, lock-guard).
func judgedGuard(t *testing.T, change func(*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding)) error {
	t.Helper()
	p, b, err := lockguard.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	change(p, b)
	return lockguard.Judge("lock-guard", p, b)
}

// The lock guard's check renders lockguard's verdict with its fix as the
// remedy; the garbage collector's follows it.
func TestJudgeGuardAndCollector(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: admissionv1.GroupName, Kind: "ValidatingAdmissionPolicy"}, SearchedVersions: []string{"v1"}}
	policies := schema.GroupResource{Group: admissionv1.GroupName, Resource: "validatingadmissionpolicies"}
	apply := "apply config/protection from the release (kubectl apply --server-side -f install.yaml of the release)"
	for _, tc := range []struct {
		name                  string
		err                   error
		status, detail        string
		remedy, collectorWant string
	}{
		{"in force", judgedGuard(t, func(*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {}),
			CheckOK, "lock-guard is in force: its policy is the one initlock ships, its binding denies every request the policy matches", "", CheckOK},
		{"missing", lockguard.Judge("lock-guard", nil, nil), CheckFail,
			"ValidatingAdmissionPolicy lock-guard and its ValidatingAdmissionPolicyBinding lock-guard are missing", apply, CheckFail},
		{"altered", judgedGuard(t, func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Validations = p.Spec.Validations[1:]
		}), CheckFail, "ValidatingAdmissionPolicy lock-guard is not the one initlock ships (spec.validations differs)",
			"kubectl delete validatingadmissionpolicy lock-guard, then " + apply, CheckFail},
		{"audit only", judgedGuard(t, func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit}
		}), CheckFail, "ValidatingAdmissionPolicyBinding lock-guard has validationActions [Audit], without Deny: the policy refuses nothing",
			"kubectl delete validatingadmissionpolicybinding lock-guard, then " + apply, CheckFail},
		{"not served", fmt.Errorf("%w: the API server does not serve the kind ValidatingAdmissionPolicy: %w", lockguard.ErrNotInForce, noMatch), CheckFail,
			"the API server does not serve the kind ValidatingAdmissionPolicy: " + noMatch.Error(),
			"upgrade the management cluster to Kubernetes v1.30 or later, then " + apply, CheckFail},
		{"forbidden", fmt.Errorf("reading ValidatingAdmissionPolicy lock-guard: %w", apierrors.NewForbidden(policies, "lock-guard", errors.New("no"))), CheckUnknown,
			`the lock guard cannot be read: kubectl-initlock needs "get" on "validatingadmissionpolicies" and "validatingadmissionpolicybindings" (API group "admissionregistration.k8s.io")`,
			"ask an administrator to bind a ClusterRole that grants it (check with 'kubectl auth can-i get validatingadmissionpolicies'), then run kubectl initlock doctor again", CheckUnknown},
		{"unavailable", apierrors.NewServiceUnavailable("etcd"), CheckUnknown, "etcd",
			"run kubectl initlock doctor again once the API server answers", CheckUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := DoctorCheck{Name: "lock-guard", Status: tc.status, Detail: tc.detail, Remedy: tc.remedy}
			expectCheck(t, fmt.Sprintf("judgeGuard(%v)", tc.err), judgeGuard("lock-guard", tc.err), want)
			if got := judgeCollector(tc.err); got.Status != tc.collectorWant || (got.Status != CheckOK) != (got.Remedy != "") {
				t.Errorf("judgeCollector(%v) = %+v, want %s with a remedy unless ok", tc.err, got, tc.collectorWant)
			}
		})
	}
}

func deployment(replicas *int32, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: replicas}, Status: appsv1.DeploymentStatus{AvailableReplicas: available}}
}

func TestJudgeManager(t *testing.T) {
	deleting := deployment(nil, 1)
	deleting.DeletionTimestamp = &metav1.Time{}
	logs := "kubectl -n sys describe deployment mgr, and kubectl -n sys logs deployment/mgr"
	for _, tc := range []struct {
		name           string
		m              managerFacts
		status, detail string
		remedy         string
	}{
		{"ready", managerFacts{deployment: deployment(nil, 1)}, CheckOK, "Deployment sys/mgr has 1 of 1 replicas available", ""},
		{"one of two", managerFacts{deployment: deployment(ptr.To[int32](2), 1)}, CheckWarn, "Deployment sys/mgr has 1 of 2 replicas available", logs},
		{"none available", managerFacts{deployment: deployment(ptr.To[int32](2), 0)}, CheckFail,
			"Deployment sys/mgr has 0 of 2 replicas available: no lock is healed, released or collected", logs},
		{"scaled to zero", managerFacts{deployment: deployment(ptr.To[int32](0), 0)}, CheckFail,
			"Deployment sys/mgr is scaled to 0 replicas: no lock is healed, released or collected", "kubectl -n sys scale deployment mgr --replicas=1"},
		{"deleting", managerFacts{deployment: deleting}, CheckFail, "Deployment sys/mgr is being deleted",
			"install initlock-manager again (kubectl apply --server-side -f install.yaml of the release)"},
		{"missing", managerFacts{}, CheckFail, "Deployment sys/mgr not found: no lock is healed, released or collected",
			"install initlock-manager (kubectl apply --server-side -f install.yaml of the release), or name its Deployment with --manager-namespace and --manager-deployment"},
		{"unreadable", managerFacts{err: errors.New("boom")}, CheckUnknown, "boom", "run kubectl initlock doctor again once the API server answers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.namespace, tc.m.name = "sys", "mgr"
			want := DoctorCheck{Name: "manager", Status: tc.status, Detail: tc.detail, Remedy: tc.remedy}
			expectCheck(t, "judgeManager", judgeManager(tc.m), want)
		})
	}
}

// A leader renews its Lease well within its duration; twice the duration
// without a renewal means it stopped.
func TestJudgeLeader(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, seconds *int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: seconds}}
		if renewedAgo >= -time.Hour {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewedAgo)}
		}
		return l
	}
	logs := "kubectl -n sys logs deployment/mgr shows why no replica leads"
	stopped := "kubectl -n sys logs deployment/mgr; another replica takes the Lease over once it expires"
	for _, tc := range []struct {
		name           string
		l              leaseFacts
		replicas       *int32
		status, detail string
		remedy         string
	}{
		{"renewed", leaseFacts{lease: lease("pod-a", 3*time.Second, ptr.To[int32](15))}, nil, CheckOK, "Lease sys/id held by pod-a, renewed 3s ago", ""},
		{"renewed by a clock ahead of ours", leaseFacts{lease: lease("pod-a", -2*time.Second, nil)}, nil, CheckOK, "Lease sys/id held by pod-a, renewed 0s ago", ""},
		{"within twice the duration", leaseFacts{lease: lease("pod-a", 30*time.Second, nil)}, nil, CheckOK, "Lease sys/id held by pod-a, renewed 30s ago", ""},
		{"stopped", leaseFacts{lease: lease("pod-a", 31*time.Second, nil)}, nil, CheckFail,
			"Lease sys/id names pod-a, which last renewed it 31s ago (lease duration 15s): the leader stopped", stopped},
		{"stopped, longer lease", leaseFacts{lease: lease("pod-a", 5*time.Minute, ptr.To[int32](60))}, nil, CheckFail,
			"Lease sys/id names pod-a, which last renewed it 5m ago (lease duration 1m0s): the leader stopped", stopped},
		{"never renewed", leaseFacts{lease: lease("pod-a", -2*time.Hour, nil)}, nil, CheckFail, "Lease sys/id names pod-a, which never renewed it", logs},
		{"released", leaseFacts{lease: lease("", time.Second, nil)}, nil, CheckFail, "Lease sys/id is held by no replica, so none acts", logs},
		{"missing", leaseFacts{}, nil, CheckFail, "Lease sys/id not found: no replica has become leader, so none acts", logs},
		{"unreadable", leaseFacts{err: errors.New("boom")}, nil, CheckUnknown, "boom", "run kubectl initlock doctor again once the API server answers"},
		{"off, one replica", leaseFacts{off: true}, nil, CheckOK, "leader election is off (no --leader-elect): the one replica acts", ""},
		{"off, two replicas", leaseFacts{off: true}, ptr.To[int32](2), CheckWarn, "leader election is off (no --leader-elect), with 2 replicas: each acts on its own",
			"add --leader-elect to the manager's arguments, as config/ installs it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.namespace, tc.l.name = "sys", "id"
			m := managerFacts{namespace: "sys", name: "mgr", deployment: deployment(tc.replicas, 1), lease: tc.l}
			want := DoctorCheck{Name: "manager-leader", Status: tc.status, Detail: tc.detail, Remedy: tc.remedy}
			expectCheck(t, "judgeLeader", judgeLeader(m, now), want)
		})
	}
	if got := judgeLeader(managerFacts{namespace: "sys", name: "mgr"}, now); got.Status != CheckSkipped {
		t.Errorf("without a Deployment: %+v, want skipped", got)
	}
}

// Each count is a status's; unknown counts as a failure, warnings and
// skipped checks do not.
func TestDoctorReportAndSummary(t *testing.T) {
	for _, tc := range []struct {
		statuses []string
		healthy  bool
		summary  string
	}{
		{[]string{CheckOK, CheckOK}, true, "No check failed (2 ok)."},
		{[]string{CheckOK, CheckWarn, CheckSkipped}, true, "No check failed (1 ok, 1 warn, 1 skipped)."},
		{[]string{CheckOK, CheckFail}, false, "1 check failed (1 ok, 1 fail): see the remedies above."},
		{[]string{CheckFail, CheckUnknown, CheckSkipped}, false, "2 checks failed (1 fail, 1 unknown, 1 skipped): see the remedies above."},
	} {
		var checks []DoctorCheck
		for _, s := range tc.statuses {
			checks = append(checks, DoctorCheck{Name: "x", Status: s})
		}
		r := newDoctorReport("v1", checks)
		if r.Healthy != tc.healthy || doctorSummary(r) != tc.summary || r.Kind != DoctorReportKind || r.APIVersion != ListAPIVersion {
			t.Errorf("%v: healthy %t, %q; want %t, %q", tc.statuses, r.Healthy, doctorSummary(r), tc.healthy, tc.summary)
		}
	}
}
