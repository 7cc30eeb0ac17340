//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// The clusterctl life cycle of the initlock add-on provider: a management
// cluster of its own, a local provider repository rendered from
// config/clusterctl, hack/capi/addon to run clusterctl's init, upgrade and
// delete, and what watches the lock guard meanwhile.
const (
	// addonNamespace is the namespace the add-on installs into.
	addonNamespace = "initlock-system"
	// addonLabel is the provider label clusterctl lists the add-on's
	// objects by (cluster.x-k8s.io/provider=addon-initlock).
	addonLabel = "addon-initlock"
	// lockGuardName names the lock guard's policy and binding as installed.
	lockGuardName = kubeenv.LockGuardPrefix + "lock-guard"
	// addonImage is the manager image of each version of the repository
	// (the version is appended): no registry serves it, and no kubelet
	// runs it; what is tested is what the API server holds.
	addonImage = "registry.example.com/initlock/initlock-manager:"
)

// certManagerCRD is the CRD of a cert-manager kind, with its plural
// (%[2]s). Those of Issuer and Certificate stand for an externally
// provisioned cert-manager: "clusterctl init" creates an Issuer and a
// Certificate to check that the cert-manager API is served, and deletes
// them, before installing any provider (initlock uses no certificate).
// Only their API is needed.
const certManagerCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]s.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]s, singular: %[3]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// clusterctlLatency is how long each byte between clusterctl and the
// management cluster takes, either way: clusterctl reaches the management
// cluster from another machine, not over the loopback.
// $INITLOCK_E2E_CLUSTERCTL_LATENCY sets it (a Go duration; 0 for none).
func clusterctlLatency(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("INITLOCK_E2E_CLUSTERCTL_LATENCY")
	if v == "" {
		return 10 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("INITLOCK_E2E_CLUSTERCTL_LATENCY: %v", err)
	}
	return d
}

// startManagementCluster starts a control plane for t alone (startPlane),
// with the garbage collector and the namespace controller and
// cert-manager's API, and no lock guard: only what the test installs. It
// is prepared as "clusterctl init" leaves a management cluster whose core
// provider is installed: the core provider cluster-api v1.14.2 in the
// inventory, whose controllers do not run here. It returns the Env and a
// cluster-admin kubeconfig for clusterctl, which reaches the API server
// through a proxy that delays every byte by clusterctlLatency, each way.
func startManagementCluster(t *testing.T) (*kubeenv.Env, string) {
	t.Helper()
	crds := t.TempDir()
	var yaml []string
	for _, kind := range []string{"Issuer", "Certificate"} {
		yaml = append(yaml, fmt.Sprintf(certManagerCRD, kind, strings.ToLower(kind)+"s", strings.ToLower(kind)))
	}
	if err := os.WriteFile(filepath.Join(crds, "cert-manager.yaml"), []byte(strings.Join(yaml, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e, kubeconfig, err := startPlane(t.Context(), kubeenv.Options{CRDDirs: []string{crds}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopPlane(e); err != nil {
			t.Error(err)
		}
	})
	if d := clusterctlLatency(t); d > 0 {
		kubeconfig = throughLatencyProxy(t, kubeconfig, d)
	}
	t.Logf("management cluster started in %.1fs", time.Since(start).Seconds())
	return e, kubeconfig
}

// throughLatencyProxy starts a TCP proxy to the API server of kubeconfig
// that delays every byte by delay, each way, until t ends, and returns a
// copy of kubeconfig that goes through it. TLS passes through untouched:
// the API server's certificate names the loopback address, whatever the
// port.
func throughLatencyProxy(t *testing.T, kubeconfig string, delay time.Duration) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	var target string
	for name, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		if target != "" && target != u.Host {
			t.Fatalf("kubeconfig %s names more than one API server", kubeconfig)
		}
		target = u.Host
		u.Host = l.Addr().String()
		cfg.Clusters[name].Server = u.String()
	}
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { delayedCopy(out, in, delay) })
			wg.Go(func() { delayedCopy(in, out, delay) })
		}
	})
	path := filepath.Join(t.TempDir(), "clusterctl.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// delayedCopy copies src to dst, each chunk delay after it was read, and
// closes both when src ends or dst fails.
func delayedCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		_, _ = dst.Close(), src.Close()
		// The reader may be blocked on a full channel: let it end.
		for range chunks {
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at.Add(delay)))
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// addonRepository lays out a local clusterctl provider repository in a
// temporary folder and returns the clusterctl.yaml that declares it, as
// docs/install.md declares the released one (the URL names the latest
// version). Each version of the add-on holds addon-components.yaml,
// rendered from config/clusterctl as a release renders it (make manifests
// with the version's image), and the project's metadata.yaml; the core
// provider cluster-api holds the metadata.yaml of Cluster API v1.14.2,
// which clusterctl reads for the management cluster's contract.
// cert-manager is declared externally provisioned: clusterctl never
// fetches it.
func addonRepository(t *testing.T, versions ...string) string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	capiDir, err := kubeenv.ModuleDir("hack/capi", "sigs.k8s.io/cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range versions {
		dir := filepath.Join(repo, addonLabel, v)
		components := filepath.Join(dir, "addon-components.yaml")
		makeManifests(t, "config/clusterctl", components, addonImage+v)
		copyFile(filepath.Join(root, "metadata.yaml"), filepath.Join(dir, "metadata.yaml"))
	}
	copyFile(filepath.Join(capiDir, "metadata.yaml"), filepath.Join(repo, coreProviderName, coreProviderVersion, "metadata.yaml"))

	config := filepath.Join(repo, "clusterctl.yaml")
	b := fmt.Appendf(nil, `providers:
- name: initlock
  type: AddonProvider
  url: file://%s
- name: %s
  type: %s
  url: file://%s
cert-manager:
  externallyProvisioned: "true"
  timeout: 1m
`, filepath.Join(repo, addonLabel, "latest", "addon-components.yaml"),
		coreProviderName, coreProviderType, filepath.Join(repo, coreProviderName, "latest", "core-components.yaml"))
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// makeManifests renders the kustomization dir into out with
// "make manifests", with image img when it is not empty.
func makeManifests(t *testing.T, dir, out, img string) {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-s", "manifests", "KUSTOMIZE_DIR=" + dir, "MANIFESTS=" + out}
	if img != "" {
		args = append(args, "IMG="+img)
	}
	cmd := exec.Command("make", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// applyLockGuard applies the lock guard of config/clusterctl/lock-guard,
// rendered with make manifests, as "kubectl apply --server-side -f" does
// (field manager kubectl, no forced ownership), and returns the objects.
func applyLockGuard(t *testing.T, e *kubeenv.Env) []*unstructured.Unstructured {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lock-guard.yaml")
	makeManifests(t, "config/clusterctl/lock-guard", out, "")
	objs, err := kubeenv.ReadObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := e.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("kubectl")); err != nil {
			t.Fatalf("kubectl apply --server-side of %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return objs
}

// addonProgramPath is hack/capi/addon: $INITLOCK_E2E_ADDON, or built as
// TestMain builds the move program.
func addonProgramPath(t *testing.T) string {
	t.Helper()
	p, err := capiProgram("addon", "INITLOCK_E2E_ADDON", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// clusterctl runs the addon program: clusterctl's command (init, upgrade
// or delete) through the clusterctl client library.
type clusterctl struct {
	program, config, kubeconfig string
}

// addonRun is one run of the addon program. Its Log is clusterctl's log
// (verbosity 5: each object it deletes, creates or patches).
type addonRun struct {
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
	programRun
}

// run runs clusterctl's command on provider with the extra flags, with an
// empty home folder and no user configuration, and fails t if it fails.
func (c clusterctl) run(t *testing.T, command, provider string, flags ...string) addonRun {
	t.Helper()
	args := append([]string{"-config", c.config, "-kubeconfig", c.kubeconfig, "-v", "5"}, flags...)
	args = append(args, command, provider)
	var r addonRun
	r.programRun = runProgram(t, "clusterctl "+command+" "+provider, c.program, args, &r)
	t.Logf("clusterctl %s %s: %.2fs in the library, %.2fs for the program", command, provider, r.Seconds, r.End.Sub(r.Start).Seconds())
	return r
}

// objectRef names one object of the install.
type objectRef struct {
	apiVersion, kind, namespace, name string
}

// object returns an object of r's kind, namespace and name.
func (r objectRef) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.apiVersion)
	u.SetKind(r.kind)
	u.SetNamespace(r.namespace)
	u.SetName(r.name)
	return u
}

func (r objectRef) String() string {
	if r.namespace == "" {
		return r.kind + " " + r.name
	}
	return r.kind + " " + r.namespace + "/" + r.name
}

// installRefs returns the objects of the components file at path, with
// the namespace clusterctl gives them (addonNamespace, every namespaced
// object of the file being in it) and none for cluster-scoped ones, then
// those of extra.
func installRefs(t *testing.T, e *kubeenv.Env, path string, extra ...*unstructured.Unstructured) []objectRef {
	t.Helper()
	objs, err := kubeenv.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	var refs []objectRef
	for _, o := range append(objs, extra...) {
		namespaced, err := e.Client.IsObjectNamespaced(o)
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		ns := ""
		if namespaced {
			ns = addonNamespace
		}
		refs = append(refs, objectRef{apiVersion: o.GetAPIVersion(), kind: o.GetKind(), namespace: ns, name: o.GetName()})
	}
	return refs
}

// uids reads the UID of each object, "" for one that does not exist.
func uids(t *testing.T, e *kubeenv.Env, refs []objectRef) map[objectRef]types.UID {
	t.Helper()
	out := map[objectRef]types.UID{}
	for _, r := range refs {
		u := r.object()
		err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(u), u)
		switch {
		case apierrors.IsNotFound(err):
			out[r] = ""
		case err != nil:
			t.Fatalf("reading %s: %v", r, err)
		default:
			out[r] = u.GetUID()
		}
	}
	return out
}

// Fates of an object across a clusterctl command.
const (
	kept      = "kept"      // the same object (the same UID)
	recreated = "recreated" // deleted, and created again (a new UID)
	gone      = "gone"      // deleted
	absent    = "absent"    // there neither before nor after
	created   = "created"   // there after only
)

// fates tells what became of each object between two readings.
func fates(before, after map[objectRef]types.UID) map[objectRef]string {
	out := map[objectRef]string{}
	for r, b := range before {
		a := after[r]
		switch {
		case b == "" && a == "":
			out[r] = absent
		case b == "":
			out[r] = created
		case a == "":
			out[r] = gone
		case a == b:
			out[r] = kept
		default:
			out[r] = recreated
		}
	}
	return out
}

// guardWatch watches the lock guard's policy and binding from their
// current versions on, and records every change to either.
type guardWatch struct {
	mu     sync.Mutex
	events []guardEvent
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// guardEvent is one change the watch saw. bad: it shows the guard going
// or gone (a delete, a deletionTimestamp, a new object of the name, a
// watch that ended).
type guardEvent struct {
	at   time.Time
	what string
	bad  bool
}

// watchLockGuard starts watching the lock guard, which must exist.
func watchLockGuard(t *testing.T, e *kubeenv.Env) *guardWatch {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	w := &guardWatch{stop: cancel}
	for kind, resource := range map[string]string{
		"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
		"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
	} {
		r := dc.Resource(admissionv1.SchemeGroupVersion.WithResource(resource))
		o, err := r.Get(ctx, lockGuardName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the lock guard's %s: %v", kind, err)
		}
		wi, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + lockGuardName, ResourceVersion: o.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watching the lock guard's %s: %v", kind, err)
		}
		w.done.Add(1)
		go w.follow(ctx, kind, o.GetUID(), wi)
	}
	return w
}

func (w *guardWatch) follow(ctx context.Context, kind string, uid types.UID, wi watch.Interface) {
	defer w.done.Done()
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					w.record(kind+": the watch ended early", true)
				}
				return
			}
			obj, isObj := ev.Object.(metav1.Object)
			if !isObj {
				w.record(fmt.Sprintf("%s: %s %v", kind, ev.Type, ev.Object), true)
				continue
			}
			bad := ev.Type != watch.Modified || obj.GetUID() != uid || obj.GetDeletionTimestamp() != nil
			w.record(fmt.Sprintf("%s %s: %s (uid %s, deletionTimestamp %v)", kind, obj.GetName(), ev.Type, obj.GetUID(), obj.GetDeletionTimestamp()), bad)
		}
	}
}

func (w *guardWatch) record(what string, bad bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, guardEvent{at: time.Now(), what: what, bad: bad})
}

// finish stops the watch and returns what it saw.
func (w *guardWatch) finish() []guardEvent {
	w.stop()
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// deleteAttempt is one delete of the held lock.
type deleteAttempt struct {
	sent, answered time.Time
	// refused: the lock guard refused it (Forbidden, naming the guard).
	refused bool
	// answer is the API server's answer otherwise.
	answer string
}

// lockDeleter deletes the held lock over and over, with a server-side dry
// run, until it is stopped, and records every answer. It alternates a
// delete as kubectl sends it (propagationPolicy Background) and one with
// no option at all (as a bootstrap provider's release sends it): the guard
// refuses both, the first as a propagating delete, the second as a delete
// of a lock not marked for release. A dry run goes through admission as a
// delete does, and leaves the lock in place when a delete is let through.
type lockDeleter struct {
	mu       sync.Mutex
	attempts []deleteAttempt
	stopped  atomic.Bool
	done     chan struct{}
}

// pause is the time between two attempts: the API server answers one in a
// millisecond or two here, so about 200 are sent a second.
const pause = 2 * time.Millisecond

func startLockDeleter(t *testing.T, e *kubeenv.Env, lock *corev1.ConfigMap) *lockDeleter {
	t.Helper()
	// Each request runs to its end: finish only stops the loop.
	ctx := context.WithoutCancel(t.Context())
	d := &lockDeleter{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for i := 0; !d.stopped.Load(); i++ {
			opts := []client.DeleteOption{client.DryRunAll}
			if i%2 == 0 {
				opts = append(opts, client.PropagationPolicy(metav1.DeletePropagationBackground))
			}
			sent := time.Now()
			err := e.Client.Delete(ctx, lock.DeepCopy(), opts...)
			a := deleteAttempt{sent: sent, answered: time.Now()}
			switch {
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), lockGuardName):
				a.refused = true
			case err == nil:
				a.answer = "let through"
			default:
				a.answer = err.Error()
			}
			d.mu.Lock()
			d.attempts = append(d.attempts, a)
			d.mu.Unlock()
			time.Sleep(pause)
		}
	}()
	return d
}

// finish stops the deleter and returns its attempts.
func (d *lockDeleter) finish() []deleteAttempt {
	d.stopped.Store(true)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.attempts)
}

// deleteCounts sorts attempts by when they were answered against a run:
// before it started, while it ran, after it ended; and lists those the
// guard did not refuse.
type deleteCounts struct {
	before, during, after int
	notRefused            []string
}

func countDeletes(attempts []deleteAttempt, r addonRun) deleteCounts {
	var c deleteCounts
	for _, a := range attempts {
		when := "during"
		switch {
		case a.answered.Before(r.Start):
			c.before++
			when = "before"
		case a.answered.After(r.End):
			c.after++
			when = "after"
		default:
			c.during++
		}
		if !a.refused {
			c.notRefused = append(c.notRefused, fmt.Sprintf("%s clusterctl %s, +%dms after it started: %s",
				when, r.Command, a.answered.Sub(r.Start).Milliseconds(), a.answer))
		}
	}
	return c
}

// guardAnswers fails t unless a dry-run delete of lock, as kubectl sends
// it, is refused by the lock guard (refused) or let through (!refused)
// within timeout.
func guardAnswers(t *testing.T, e *kubeenv.Env, lock *corev1.ConfigMap, refused bool, timeout time.Duration) {
	t.Helper()
	kubeenv.Eventually(t, timeout, func() error {
		err := e.Client.Delete(t.Context(), lock.DeepCopy(), client.DryRunAll, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case refused && apierrors.IsForbidden(err) && strings.Contains(err.Error(), lockGuardName), !refused && err == nil:
			return nil
		case refused:
			return fmt.Errorf("a delete of lock %s/%s: %w, want it refused by %s", lock.Namespace, lock.Name, err, lockGuardName)
		}
		return fmt.Errorf("a delete of lock %s/%s: %w, want it let through", lock.Namespace, lock.Name, err)
	})
}

// sameLockGuard fails t unless objs, as rendered, are the shipped lock
// guard, named as installed (kubeenv.ReadLockGuard).
func sameLockGuard(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	g, err := kubeenv.ReadLockGuard()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("config/clusterctl/lock-guard renders %d objects, want the policy and its binding", len(objs))
	}
	for _, o := range objs {
		var got, want any
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			convert(t, o, p)
			got, want = p.Spec, g.Policy.Spec
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionv1.ValidatingAdmissionPolicyBinding{}
			convert(t, o, b)
			got, want = b.Spec, g.Binding.Spec
		default:
			t.Fatalf("config/clusterctl/lock-guard renders a %s", o.GetKind())
		}
		if o.GetName() != lockGuardName {
			t.Errorf("config/clusterctl/lock-guard renders %s %s, want %s", o.GetKind(), o.GetName(), lockGuardName)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("config/clusterctl/lock-guard's %s is not the shipped one:\n got %s\nwant %s", o.GetKind(), gj, wj)
		}
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
