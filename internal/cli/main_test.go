package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

var (
	env    *kubeenv.Env
	update = flag.Bool("update", false, "rewrite the golden files under testdata")
)

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{LockGuard: true}, &env) }

var adminKubeconfig = sync.OnceValues(func() (string, error) {
	return env.WriteKubeconfig("initlock-cli-admin", []string{"system:masters"})
})

// invocation is how a command is run in process.
type invocation struct {
	// clock; the real one when nil.
	clock clock.PassiveClock
	// kubeconfig; the admin's when empty.
	kubeconfig string
	// noKubeconfig passes no --kubeconfig at all.
	noKubeconfig bool
	// wrap wraps the rest.Config (counting, injecting).
	wrap func(*rest.Config) *rest.Config
	// stdin is what the user types; in, when set, is read instead.
	stdin string
	in    io.Reader
	// terminal makes every stream a terminal.
	terminal bool
	// progressThreshold; the default when 0.
	progressThreshold int
}

type result struct {
	out, err string
	code     int
}

func (inv invocation) run(t *testing.T, args ...string) result {
	t.Helper()
	kc := inv.kubeconfig
	if kc == "" && !inv.noKubeconfig {
		var err error
		if kc, err = adminKubeconfig(); err != nil {
			t.Fatalf("writing admin kubeconfig: %v", err)
		}
	}
	var out, errOut bytes.Buffer
	in := inv.in
	if in == nil {
		in = strings.NewReader(inv.stdin)
	}
	opts := cli.Options{
		IOStreams:         genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut},
		Clock:             inv.clock,
		Version:           "v0.0.0-test",
		WrapConfig:        inv.wrap,
		ProgressThreshold: inv.progressThreshold,
	}
	if inv.terminal {
		opts.IsTerminal = func(any) bool { return true }
	} else {
		opts.IsTerminal = func(any) bool { return false }
	}
	if !inv.noKubeconfig {
		args = append(args, "--kubeconfig", kc)
	}
	code := cli.Execute(t.Context(), opts, args)
	return result{out: out.String(), err: errOut.String(), code: code}
}

// run runs a command as an admin with the real clock.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return invocation{}.run(t, args...)
}

func (r result) expectCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err)
	}
}

// counting returns a wrapper that counts requests into c.
func counting(c *kubeenv.Counter) func(*rest.Config) *rest.Config {
	return c.CountingConfig
}

// fixedNamespace creates a namespace with a fixed name, for golden output.
func fixedNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	// An earlier run in this process (-count) may still be deleting it.
	kubeenv.Eventually(t, 60*time.Second, func() error {
		return env.Client.Create(t.Context(), ns.DeepCopy())
	})
	t.Cleanup(func() {
		if err := env.Client.Delete(context.WithoutCancel(t.Context()), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// Fixtures. Clusters, Machines and locks are made as the Cluster API and
// the upstream bootstrap provider make them.

type clusterOpt func(*unstructured.Unstructured)

func paused(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["paused"] = true }

func newCluster(t *testing.T, ns, name string, initialised bool, opts ...clusterOpt) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	u := kubeenv.NewCluster(capi.V1Beta2, ns, name)
	for _, o := range opts {
		o(u)
	}
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("creating cluster %s/%s: %v", ns, name, err)
	}
	if initialised {
		if err := kubeenv.SetInitialized(ctx, env.Client, u); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

func newMachine(t *testing.T, ns, cluster, name string, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	u := kubeenv.NewMachine(capi.V1Beta2, ns, cluster, name)
	u.SetAnnotations(annotations)
	if err := env.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating machine %s/%s: %v", ns, name, err)
	}
	return u
}

func ownerRef(cluster *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: cluster.GetAPIVersion(), Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}
}

// newLock writes a lock as the upstream provider does: label, record and
// an ownerReference to owner (none when owner is nil).
func newLock(t *testing.T, ns, cluster, holder string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	cm := kubeenv.NewLock(ns, cluster, holder, owner)
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", ns, cm.Name, err)
	}
	return cm
}

func newConfigMap(t *testing.T, ns, name string, labels, data map[string]string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{ownerRef(owner)}
	}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

// resourceVersions maps every ConfigMap of ns to its resourceVersion.
func resourceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing configmaps: %v", err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// listJSON runs list -o json in ns and decodes it.
func listJSON(t *testing.T, ns string, extra ...string) cli.LockList {
	t.Helper()
	r := run(t, append([]string{"list", "-n", ns, "-o", "json"}, extra...)...)
	r.expectCode(t, 0)
	var l cli.LockList
	if err := json.Unmarshal([]byte(r.out), &l); err != nil {
		t.Fatalf("decoding list output: %v\n%s", err, r.out)
	}
	return l
}

func byCluster(l cli.LockList) map[string]cli.LockStatus {
	out := map[string]cli.LockStatus{}
	for _, s := range l.Items {
		out[s.Cluster] = s
	}
	return out
}

var (
	createdJSON = regexp.MustCompile(`"(created|clusterAbsentSince)": "[^"]+"`)
	createdYAML = regexp.MustCompile(`(?m)^(\s*(created|clusterAbsentSince)): .+$`)
)

// mask replaces what the API server sets (creation times) with
// placeholders.
func mask(s string) string {
	s = createdJSON.ReplaceAllString(s, `"$1": "<time>"`)
	return createdYAML.ReplaceAllString(s, `$1: <time>`)
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run with -update to accept it)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
