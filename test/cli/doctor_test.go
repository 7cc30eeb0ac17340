package clisuite

import (
	"cmp"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// doctorArgs runs doctor on in: its manager, Velero and locks.
func (in doctorInstall) doctorArgs(extra ...string) []string {
	return append([]string{"doctor", "-n", in.ns, "--manager-namespace", in.ns, "--velero-namespace", in.ns}, extra...)
}

// doctorAt is an invocation at when, three seconds after the leader
// renewed its Lease unless a test says otherwise.
func doctorAt(when time.Time) invocation {
	return invocation{clock: testingclock.NewFakePassiveClock(when)}
}

// runDoctorJSON runs doctor -o json on in and decodes its report.
func (b *Backend) runDoctorJSON(t *testing.T, inv invocation, in doctorInstall, code int) cli.DoctorReport {
	t.Helper()
	r := b.run(t, inv, in.doctorArgs("-o", "json")...).ExpectCode(t, code)
	var report cli.DoctorReport
	decodeJSON(t, r.Out, &report)
	if r.Err != "" {
		t.Errorf("doctor -o json wrote on stderr: %s", r.Err)
	}
	return report
}

// serverVersion is the test API server's version, as doctor reads it.
func serverVersion(t *testing.T) string {
	t.Helper()
	v, err := env.Discovery(t).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

// The table of a healthy install: every check ok.
const doctorHealthy = `CHECK                STATUS  DETAIL
lock-guard           ok      initlock-lock-guard is in force: its policy is the one initlock ships, its binding denies every request the policy matches
garbage-collector    ok      kept out: the lock guard refuses every delete of a held lock that names a propagation policy, as all the collector's do, whatever its user
manager              ok      Deployment <ns>/initlock-controller-manager has 1 of 1 replicas available
manager-version      ok      v0.0.0-test, as kubectl-initlock (image ghcr.io/initlock/initlock-manager:v0.0.0-test@sha256:4f2d8c1e9b7a…)
manager-leader       ok      Lease <ns>/initlock-manager.initlock.dev held by initlock-controller-manager-5d8f7c9b4-x2lqp_0f4c2d1e, renewed 3s ago
manager-rbac         ok      ServiceAccount <ns>/initlock-controller-manager is granted every rule of config/rbac
velero-plugin        ok      v0.0.0-test, as kubectl-initlock (Deployment <ns>/velero runs ghcr.io/initlock/velero-plugin-initlock:v0.0.0-test)
kubernetes-version   ok      <kube>: supported (v1.30 or later)
cluster-api-version  ok      clusters.cluster.x-k8s.io serves v1beta1, v1beta2 (storage v1beta2): supported (Cluster API v1.11 or later)
locks                ok      no lock needs a person (1 lock in namespace <ns>)

No check failed (10 ok).
`

// A healthy install passes every check, in the table and in JSON, exit
// code 0, and doctor writes nothing.
func TestDoctorHealthyInstall(t *testing.T) {
	b := apiServer()
	in := b.installForDoctor(t)
	var c kubeenv.Counter
	r := b.run(t, invocation{clock: testingclock.NewFakePassiveClock(in.renewed.Add(3 * time.Second)), counter: &c}, in.doctorArgs()...).ExpectCode(t, cli.ExitOK)
	want := strings.NewReplacer("<ns>", in.ns, "<kube>", serverVersion(t)).Replace(doctorHealthy)
	if r.Out != want || r.Err != "" {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", r.Out, want, r.Err)
	}
	expectN(t, "writes of doctor", c.Writes(), 0)

	report := b.runDoctorJSON(t, doctorAt(in.renewed.Add(3*time.Second)), in, cli.ExitOK)
	if report.APIVersion != "initlock.dev/v1alpha1" || report.Kind != "DoctorReport" || report.Version != doctorVersion || !report.Healthy ||
		report.Summary != (cli.DoctorSummary{OK: 10}) || len(report.Checks) != 10 {
		t.Errorf("doctor -o json: %+v", report)
	}
	for _, check := range report.Checks {
		if check.Status != cli.CheckOK || check.Remedy != "" || !strings.Contains(want, check.Name+" ") || !strings.Contains(want, check.Detail) {
			t.Errorf("doctor -o json: %+v, not as the table says", check)
		}
	}
	r = b.run(t, doctorAt(in.renewed.Add(3*time.Second)), in.doctorArgs("-o", "yaml")...).ExpectCode(t, cli.ExitOK)
	if !strings.HasPrefix(r.Out, "apiVersion: initlock.dev/v1alpha1\nchecks:\n- detail: ") || !strings.Contains(r.Out, "\nhealthy: true\nkind: DoctorReport\n") {
		t.Errorf("doctor -o yaml:\n%s", r.Out)
	}
}

// doctorRemedyApply is the remedy of a lock guard that is missing.
const doctorRemedyApply = "apply config/protection from the release (kubectl apply --server-side -f install.yaml of the release)"

// collectorNotKeptOut is the garbage collector's check while the lock
// guard is not in force.
var collectorNotKeptOut = cli.DoctorCheck{Name: "garbage-collector", Status: cli.CheckFail,
	Detail: "the lock guard is not in force, so the garbage collector deletes a held lock whose Cluster ownerReference names an old UID (a restore, a copy)",
	Remedy: "put the lock guard in force (see lock-guard): it keeps the collector out whatever user the collector runs as"}

// doctorBreakages each break a healthy install once, with the checks that
// are then not ok (every other stays ok), and the exit code.
var doctorBreakages = []struct {
	name   string
	breaks func(t *testing.T, b *Backend, in doctorInstall)
	// after is how long after the leader's last renewal doctor runs; 3s
	// when 0.
	after time.Duration
	code  int
	want  []cli.DoctorCheck
}{
	{name: "lock guard missing", breaks: func(t *testing.T, _ *Backend, _ doctorInstall) { removeGuard(t) }, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "lock-guard", Status: cli.CheckFail, Remedy: doctorRemedyApply,
			Detail: "ValidatingAdmissionPolicy initlock-lock-guard and its ValidatingAdmissionPolicyBinding initlock-lock-guard are missing"},
		collectorNotKeptOut,
	}},
	{name: "lock guard policy altered", breaks: func(t *testing.T, _ *Backend, _ doctorInstall) { dropFirstValidation(t) }, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "lock-guard", Status: cli.CheckFail,
			Detail: "ValidatingAdmissionPolicy initlock-lock-guard is not the one initlock ships (spec.validations differs)",
			Remedy: "kubectl delete validatingadmissionpolicy initlock-lock-guard, then " + doctorRemedyApply},
		collectorNotKeptOut,
	}},
	{name: "lock guard binding narrowed", breaks: func(t *testing.T, _ *Backend, _ doctorInstall) {
		env.WeakenLockGuard(t, func(g kubeenv.LockGuard) {
			g.Binding.Spec.MatchResources = &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"initlock.dev/guarded": "yes"}}}
		})
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "lock-guard", Status: cli.CheckFail,
			Detail: "ValidatingAdmissionPolicyBinding initlock-lock-guard keeps the policy from some of the requests it applies to (spec.matchResources.namespaceSelector)",
			Remedy: "kubectl delete validatingadmissionpolicybinding initlock-lock-guard, then " + doctorRemedyApply},
		collectorNotKeptOut,
	}},
	{name: "manager not ready", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		b.setAvailable(t, in.manager, 0)
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "manager", Status: cli.CheckFail,
			Detail: "Deployment <ns>/initlock-controller-manager has 0 of 1 replicas available: no lock is healed, released or collected",
			Remedy: "kubectl -n <ns> describe deployment initlock-controller-manager, and kubectl -n <ns> logs deployment/initlock-controller-manager"},
	}},
	{name: "manager missing", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		if err := b.Client.Delete(t.Context(), in.manager); err != nil {
			t.Fatal(err)
		}
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "manager", Status: cli.CheckFail, Detail: "Deployment <ns>/initlock-controller-manager not found: no lock is healed, released or collected",
			Remedy: "install initlock-manager (kubectl apply --server-side -f install.yaml of the release), or name its Deployment with --manager-namespace and --manager-deployment"},
		{Name: "manager-version", Status: cli.CheckSkipped, Detail: "no Deployment <ns>/initlock-controller-manager to read (see manager)"},
		{Name: "manager-leader", Status: cli.CheckSkipped, Detail: "no Deployment <ns>/initlock-controller-manager to read (see manager)"},
		{Name: "manager-rbac", Status: cli.CheckSkipped, Detail: "no manager Deployment whose ServiceAccount to look at (see manager)"},
	}},
	{name: "leader stopped renewing", after: time.Minute, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "manager-leader", Status: cli.CheckFail,
			Detail: "Lease <ns>/initlock-manager.initlock.dev names " + doctorLeaseHolder + ", which last renewed it 60s ago (lease duration 15s): the leader stopped",
			Remedy: "kubectl -n <ns> logs deployment/initlock-controller-manager; another replica takes the Lease over once it expires"},
	}},
	{name: "manager of another release", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		b.update(t, in.manager, func() { in.manager.Spec.Template.Spec.Containers[0].Image = "ghcr.io/initlock/initlock-manager:v0.1.0" })
		b.setAvailable(t, in.manager, 1)
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "manager-version", Status: cli.CheckFail,
			Detail: "v0.1.0, kubectl-initlock v0.0.0-test: different releases (image ghcr.io/initlock/initlock-manager:v0.1.0)",
			Remedy: "upgrade initlock-manager to v0.0.0-test (docs/install.md#upgrading), or use the kubectl-initlock of v0.1.0"},
	}},
	{name: "plugin of another release", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		b.update(t, in.velero, func() {
			in.velero.Spec.Template.Spec.InitContainers[1].Image = "ghcr.io/initlock/velero-plugin-initlock:v0.1.0"
		})
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "velero-plugin", Status: cli.CheckFail,
			Detail: "v0.1.0, kubectl-initlock v0.0.0-test: different releases (Deployment <ns>/velero runs ghcr.io/initlock/velero-plugin-initlock:v0.1.0)",
			Remedy: "velero plugin remove ghcr.io/initlock/velero-plugin-initlock:v0.1.0, then velero plugin add the plugin image of v0.0.0-test's release notes (each restarts Velero)"},
	}},
	{name: "velero without the plugin", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		b.update(t, in.velero, func() { in.velero.Spec.Template.Spec.InitContainers = in.velero.Spec.Template.Spec.InitContainers[:1] })
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "velero-plugin", Status: cli.CheckFail,
			Detail: "Deployment <ns>/velero runs without initlock's plugin: a restore leaves the restored objects without their ownerReferences",
			Remedy: "velero plugin add ghcr.io/initlock/velero-plugin-initlock@sha256:<digest of v0.0.0-test's release notes> (it restarts Velero: run it when no backup or restore is in progress)"},
	}},
	{name: "velero not installed", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		if err := b.Client.Delete(t.Context(), in.velero); err != nil {
			t.Fatal(err)
		}
	}, code: cli.ExitOK, want: []cli.DoctorCheck{
		{Name: "velero-plugin", Status: cli.CheckWarn,
			Detail: "Deployment <ns>/velero not found: Velero is not installed there, and initlock's plugin is needed only where Velero restores this cluster",
			Remedy: "if Velero runs elsewhere, name it with --velero-namespace and --velero-deployment (docs/install.md#the-velero-plugin)"},
	}},
	{name: "rbac rule missing", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		b.update(t, in.clusterRole, func() {
			rule := &in.clusterRole.Rules[0]
			rule.Verbs = slices.DeleteFunc(rule.Verbs, func(v string) bool { return v == "delete" })
		})
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "manager-rbac", Status: cli.CheckFail,
			Detail: "ServiceAccount <ns>/initlock-controller-manager lacks rules of config/rbac: in every namespace: delete configmaps",
			Remedy: "apply config/rbac of the release (kubectl apply --server-side -f install.yaml), or grant ServiceAccount <ns>/initlock-controller-manager what it lacks"},
	}},
	{name: "corrupt lock", breaks: func(t *testing.T, b *Backend, in doctorInstall) {
		cl := b.newCluster(t, in.ns, "c-corrupt", false)
		b.newConfigMap(t, in.ns, "c-corrupt-lock", map[string]string{wire.ClusterNameLabel: "c-corrupt"}, map[string]string{wire.DataKey: "not json"}, cl)
	}, code: cli.ExitChecksFailed, want: []cli.DoctorCheck{
		{Name: "locks", Status: cli.CheckFail, Detail: "1 lock needs a person (of 2 locks in namespace <ns>)",
			Remedy: "kubectl initlock list -n <ns> -o wide shows them, and kubectl initlock repair -n <ns> --dry-run=client what a person must do for each",
			Items: []string{"<ns>/c-corrupt-lock (corrupt): corrupt lock: lock-information is not a JSON lock record: invalid character 'o' in literal null (expecting 'u'); " +
				"it is never taken over silently. Once no machine of the cluster is running kubeadm init: kubectl initlock release c-corrupt -n <ns> --force"}},
	}},
}

// Each breakage fails its check with its remedy, and the exit code is 2
// (0 for a warning); every other check stays ok. The table shows the same
// as JSON.
func TestDoctorBreakages(t *testing.T) {
	b := apiServer()
	for _, tc := range doctorBreakages {
		t.Run(tc.name, func(t *testing.T) {
			in := b.installForDoctor(t)
			if tc.breaks != nil {
				tc.breaks(t, b, in)
			}
			at := in.renewed.Add(cmp.Or(tc.after, 3*time.Second))
			report := b.runDoctorJSON(t, doctorAt(at), in, tc.code)
			want := map[string]cli.DoctorCheck{}
			for _, c := range tc.want {
				c.Detail = strings.ReplaceAll(c.Detail, "<ns>", in.ns)
				c.Remedy = strings.ReplaceAll(c.Remedy, "<ns>", in.ns)
				for i := range c.Items {
					c.Items[i] = strings.ReplaceAll(c.Items[i], "<ns>", in.ns)
				}
				want[c.Name] = c
			}
			for _, got := range report.Checks {
				w, broken := want[got.Name]
				switch {
				case broken && !reflect.DeepEqual(got, w):
					t.Errorf("check %s:\n%+v\nwant:\n%+v", got.Name, got, w)
				case !broken && got.Status != cli.CheckOK:
					t.Errorf("check %s is %s, want ok: %+v", got.Name, got.Status, got)
				}
			}
			if report.Healthy != (tc.code == cli.ExitOK) {
				t.Errorf("healthy %t with exit code %d", report.Healthy, tc.code)
			}

			r := b.run(t, doctorAt(at), in.doctorArgs()...).ExpectCode(t, tc.code)
			for _, c := range want {
				row := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(c.Name) + " +" + c.Status + " +" + regexp.QuoteMeta(c.Detail) + "$")
				remedy := regexp.MustCompile("(?m)^ +remedy: " + regexp.QuoteMeta(c.Remedy) + "$")
				if !row.MatchString(r.Out) || (c.Remedy != "" && !remedy.MatchString(r.Out)) {
					t.Errorf("the table does not show %+v:\n%s", c, r.Out)
				}
				for _, item := range c.Items {
					if !regexp.MustCompile("(?m)^ +- " + regexp.QuoteMeta(item) + "$").MatchString(r.Out) {
						t.Errorf("the table does not show %q:\n%s", item, r.Out)
					}
				}
			}
		})
	}
}

// update changes obj with change, read again first.
func (b *Backend) update(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	change()
	if err := b.Client.Update(t.Context(), obj); err != nil {
		t.Fatalf("updating %T %s: %v", obj, obj.GetName(), err)
	}
}
