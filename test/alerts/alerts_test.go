package alerts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/velerosim"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

// Every alert links to its section of docs/operating.md, and keeps only
// bounded labels: its severity and those its expression aggregates by.
func TestRulesHaveRunbooksAndBoundedLabels(t *testing.T) {
	m := readMonitoring(t)
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "https://github.com/initlock/initlock/blob/main/docs/operating.md#"
	by := regexp.MustCompile(`\b(?:by|on) \(([^)]*)\)`)
	for _, r := range m.rules {
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], prefix)
		if !ok || anchor != strings.ToLower(r.Alert) || !strings.Contains(string(b), "\n## "+r.Alert+"\n") {
			t.Errorf("%s: runbook_url %q, want %s%s and a section \"## %s\" in docs/operating.md", r.Alert, r.Annotations["runbook_url"], prefix, strings.ToLower(r.Alert), r.Alert)
		}
		for k := range r.Labels {
			if k != "severity" {
				t.Errorf("%s: label %s: an alert sets only its severity", r.Alert, k)
			}
		}
		// Every selection of series is aggregated by bounded labels.
		for _, m := range by.FindAllStringSubmatch(r.Expr, -1) {
			for l := range strings.SplitSeq(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains([]string{"state", "group", "kind"}, l) {
					t.Errorf("%s: aggregates by %q, which is not bounded", r.Alert, l)
				}
			}
		}
		if !strings.Contains(r.Expr, "by (") && !strings.Contains(r.Expr, "sum(") && !strings.Contains(r.Expr, "max(") {
			t.Errorf("%s: its expression does not aggregate, so its labels are those of the pods", r.Alert)
		}
	}
}

// The ServiceMonitor selects the manager's metrics Service of config/default
// and its HTTPS port, and the job label it gives the series, the Service's
// name once config/default prefixes it, is the one the alerts select.
func TestServiceMonitorMatchesTheService(t *testing.T) {
	m := readMonitoring(t)
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "default", "metrics_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := yaml.UnmarshalStrict(b, svc); err != nil {
		t.Fatal(err)
	}
	for k, v := range m.selector {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service %s does not carry (%v)", k, v, svc.Name, svc.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != m.port || m.scheme != "https" {
		t.Errorf("the ServiceMonitor scrapes port %q over %s; the Service has %v", m.port, m.scheme, svc.Spec.Ports)
	}
	if name := "initlock-" + svc.Name; name != job {
		t.Errorf("the Service is %s once installed; the alerts select job=%q", name, job)
	}
	for _, r := range m.rules {
		if strings.Contains(r.Expr, "job=") && !strings.Contains(r.Expr, `job="`+job+`"`) {
			t.Errorf("%s selects another job: %s", r.Alert, r.Expr)
		}
	}
}

// InitLockStalled fires 15 minutes and its for: duration after a lock is
// seen held by a Machine that is gone, not before, and ends when the lock
// is released. The manager releases such a lock at once unless the
// Cluster's grant register names another Machine, which it leaves to that
// Machine's next lock attempt: here none comes.
func TestStalledLock(t *testing.T) {
	ns := env.Namespace(t)
	_, tg := startManager(t, ns, nil)
	cluster := managertest.CreateCluster(t, env.Client, env.CAPIVersion, ns, "c1", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"c1-cp-1","token":"t1"}`})
	})
	managertest.CreateMachine(t, env.Client, env.CAPIVersion, ns, "c1", "c1-cp-1")
	managertest.Create(t, env.Client, kubeenv.NewLock(ns, "c1", "c1-cp-gone", cluster))
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "stale-holder"}, 1)

	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(15*time.Minute, tg)
	tl.expectQuiet()
	tl.hold(6*time.Minute, tg)
	tl.expectFiring("InitLockStalled", map[string]string{"state": "stale-holder", "severity": "critical"})
	if len(tl.fired) != 1 {
		t.Fatalf("alerts fired: %v", tl.fired)
	}

	// Released, as kubectl initlock release does (marked, then deleted,
	// past the lock guard): the alert ends.
	if err := kubeenv.ReleaseLock(t.Context(), env.Client, kubeenv.NewLock(ns, "c1", "", nil)); err != nil {
		t.Fatal(err)
	}
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "stale-holder"}, 0)
	tl.scrape(tg)
	tl.hold(time.Minute, tg)
	if got := tl.firing("InitLockStalled"); len(got) != 0 {
		t.Fatalf("InitLockStalled still fires after the release: %v", got)
	}
}

// InitLockOrphanNotCollected fires when an orphan lock stays an hour,
// here because its holder Machine still exists, which keeps the manager
// from collecting it.
func TestOrphanNotCollected(t *testing.T) {
	ns := env.Namespace(t)
	_, tg := startManager(t, ns, nil)
	managertest.Create(t, env.Client, kubeenv.NewMachine(env.CAPIVersion, ns, "c1", "c1-cp-0"))
	managertest.Create(t, env.Client, kubeenv.NewLock(ns, "c1", "c1-cp-0", nil))
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "orphan"}, 1)

	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(time.Hour, tg)
	tl.expectQuiet()
	tl.hold(6*time.Minute, tg)
	tl.expectFiring("InitLockOrphanNotCollected", map[string]string{"state": "orphan"})
}

// InitLockNeedsOperator fires, once per state, for a corrupt lock and for a
// ConfigMap that takes a cluster's lock name without being a lock, after
// ten minutes.
func TestNeedsOperator(t *testing.T) {
	ns := env.Namespace(t)
	_, tg := startManager(t, ns, nil)
	managertest.Create(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-lock"}, Data: map[string]string{"settings": "mine"}})
	managertest.CreateCluster(t, env.Client, env.CAPIVersion, ns, "c1")
	c2 := managertest.CreateCluster(t, env.Client, env.CAPIVersion, ns, "c2")
	corrupt := kubeenv.NewLock(ns, "c2", "c2-cp-0", c2)
	corrupt.Data[wire.DataKey] = "not json"
	managertest.Create(t, env.Client, corrupt)
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "foreign"}, 1)
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "corrupt"}, 1)

	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(9*time.Minute, tg)
	tl.expectQuiet()
	tl.hold(2*time.Minute, tg)
	got := tl.firing("InitLockNeedsOperator")
	var states []string
	for _, l := range got {
		states = append(states, l.Get("state"))
	}
	slices.Sort(states)
	if !slices.Equal(states, []string{"corrupt", "foreign"}) {
		t.Fatalf("InitLockNeedsOperator fires for %v, want corrupt and foreign\n%s", got, strings.Join(tl.log, "\n"))
	}
}

// InitLockRelinkForbidden fires five minutes after the relinker is refused
// a patch for lack of permission, stays while it is refused, and ends 30
// minutes after the permission is granted.
func TestRelinkForbidden(t *testing.T) {
	ns := env.Namespace(t)
	v := env.CAPIVersion
	// The manager's role, less patch on Machines.
	var rules []rbacv1.PolicyRule
	for _, r := range kubeenv.GeneratedClusterRoleRules(t, "rbac") {
		if slices.Contains(r.APIGroups, capi.Group) && slices.Contains(r.Resources, "machines") && slices.Contains(r.Verbs, "patch") {
			others := r.DeepCopy()
			others.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool { return res == "machines" })
			r.Resources = []string{"machines"}
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "patch" })
			if len(others.Resources) > 0 {
				rules = append(rules, *others)
			}
		}
		rules = append(rules, r)
	}
	user := "initlock-" + ns
	env.BindClusterRole(t, user, rules, kubeenv.UserSubject(user))
	cfg, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			return err
		}
		return c.List(t.Context(), &corev1.ConfigMapList{}, client.InNamespace(ns))
	})
	// The relinker's metrics are on the registry the manager serves, as in
	// initlock-manager; it retries a refused object every second instead
	// of every five minutes.
	_, tg := startManager(t, ns, cfg, func(o *manager.Options) {
		o.Setups = append(o.Setups, relink.ManagerSetup(relink.Options{Namespace: ns, WarnAfter: -1, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}))
	})
	waitForMetric(t, tg, relink.ForbiddenMetric, map[string]string{"kind": "Machine"}, 0)
	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(10*time.Minute, tg)

	// A restored Machine whose relink the API server refuses.
	// Its owner is the backed-up one (the UID the backup recorded), which
	// the link rule links to.
	ms := kubeenv.NewMachineGroup("MachineSet", v, ns, "c1", "md-0-abc")
	managertest.Create(t, env.Client, ms)
	machine := kubeenv.NewMachine(v, ns, "c1", "md-0-abc-0")
	machine.SetAnnotations(map[string]string{relink.Annotation: relink.Encode([]relink.OwnerRef{{APIVersion: capi.Group + "/" + v, Kind: "MachineSet", Name: "md-0-abc", UID: ms.GetUID()}})})
	managertest.Create(t, env.Client, machine)
	waitForCount(t, tg, relink.ForbiddenMetric, map[string]string{"kind": "Machine"}, 1)
	tl.scrape(tg)
	tl.hold(4*time.Minute, tg)
	tl.expectQuiet()
	// Refused again at its next retry, as every five minutes.
	waitForCount(t, tg, relink.ForbiddenMetric, map[string]string{"kind": "Machine"}, 2)
	tl.scrape(tg)
	tl.hold(time.Minute, tg)
	tl.expectFiring("InitLockRelinkForbidden", map[string]string{"group": capi.Group, "kind": "Machine"})

	// Granted: the Machine is relinked, the count stops, the alert ends.
	env.BindClusterRole(t, user+"-patch", []rbacv1.PolicyRule{{APIGroups: []string{capi.Group}, Resources: []string{"machines"}, Verbs: []string{"patch"}}}, kubeenv.UserSubject(user))
	kubeenv.Eventually(t, 30*time.Second, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capi.MachineGVK(v))
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(machine), u); err != nil {
			return err
		}
		if len(u.GetOwnerReferences()) != 1 {
			return fmt.Errorf("machine not relinked yet: %v", u.GetOwnerReferences())
		}
		return nil
	})
	tl.scrape(tg)
	tl.hold(25*time.Minute, tg)
	if len(tl.firing("InitLockRelinkForbidden")) == 0 {
		t.Fatalf("InitLockRelinkForbidden ended within 25 minutes of the last refusal\n%s", strings.Join(tl.log, "\n"))
	}
	tl.hold(10*time.Minute, tg)
	if got := tl.firing("InitLockRelinkForbidden"); len(got) != 0 {
		t.Fatalf("InitLockRelinkForbidden still fires 35 minutes after the last refusal: %v", got)
	}
}

// InitLockManagerDown fires when no replica has been up for 10 minutes
// while the manager last reported locks.
func TestManagerDown(t *testing.T) {
	ns := env.Namespace(t)
	rm, tg := startManager(t, ns, nil)
	cluster := managertest.CreateCluster(t, env.Client, env.CAPIVersion, ns, "c1")
	managertest.CreateMachine(t, env.Client, env.CAPIVersion, ns, "c1", "c1-cp-0")
	managertest.Create(t, env.Client, kubeenv.NewLock(ns, "c1", "c1-cp-0", cluster))
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "healthy"}, 1)

	tl := newTimeline(t)
	tl.scrape(tg)
	tl.hold(10*time.Minute, tg)
	rm.Stop()
	tl.scrape(tg)
	tl.hold(9*time.Minute, tg)
	tl.expectQuiet()
	tl.hold(2*time.Minute, tg)
	tl.expectFiring("InitLockManagerDown", map[string]string{"severity": "critical"})
}

// No alert fires through what happens every day: a restore of many
// clusters whose locks come back first and their Clusters twenty minutes
// later, a single-node cluster whose kubeadm init takes forty minutes, and
// a rolling update of the manager.
func TestQuietThroughRestoreInitAndRollingUpdate(t *testing.T) {
	ns := env.Namespace(t)
	rm, tg := startManager(t, ns, nil)
	v := env.CAPIVersion
	tl := newTimeline(t)

	// A restore of 20 clusters: Velero restores the ConfigMaps first, then
	// the Machines and, last, the Clusters.
	const n = 20
	var locks, rest []client.Object
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		locks = append(locks, kubeenv.NewLock(ns, name, name+"-cp-0", nil))
		rest = append(rest, kubeenv.NewMachine(v, ns, name, name+"-cp-0"), kubeenv.NewCluster(v, ns, name))
	}
	velerosim.Restore(t, env.Config, velerosim.Options{}, locks...)
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "orphan"}, n)
	tl.scrape(tg)
	tl.hold(20*time.Minute, tg)
	velerosim.Restore(t, env.Config, velerosim.Options{}, rest...)
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "healthy"}, n)
	tl.scrape(tg)
	tl.hold(10*time.Minute, tg)

	// A single-node cluster: its only Machine holds the lock through a long
	// kubeadm init, then the control plane is initialised and the lock
	// released.
	solo := managertest.CreateCluster(t, env.Client, v, ns, "solo")
	managertest.CreateMachine(t, env.Client, v, ns, "solo", "solo-cp-0")
	managertest.Create(t, env.Client, kubeenv.NewLock(ns, "solo", "solo-cp-0", solo))
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "healthy"}, n+1)
	tl.scrape(tg)
	tl.hold(40*time.Minute, tg)
	if err := kubeenv.SetInitialized(t.Context(), env.Client, solo); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 30*time.Second, kubeenv.LockGone(t.Context(), env.Client, ns, "solo"))
	waitForMetric(t, tg, "initlock_locks", map[string]string{"state": "healthy"}, n)
	tl.scrape(tg)
	tl.hold(10*time.Minute, tg)

	// A rolling update: the old replica goes, a new one, at a new address,
	// is scraped from the next scrape on.
	rm.Stop()
	tl.scrape(tg)
	_, next := startManager(t, ns, nil)
	waitForMetric(t, next, "initlock_locks", map[string]string{"state": "healthy"}, n)
	tl.scrape(tg, next)
	tl.hold(30*time.Minute, tg, next)
	tl.expectQuiet()
	if len(tl.pending) > 0 {
		t.Logf("pending on the way, never firing: %v", tl.pending)
	}
}
