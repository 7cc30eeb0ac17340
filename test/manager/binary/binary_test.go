package binary_test

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{}, &env) }

// TestBinary builds initlock-manager, runs it with a kubeconfig and the
// flags of config/ and config/relink-secrets, and checks that it becomes
// ready, elects itself, heals a lock, relinks a restored Secret, serves its
// metrics (plain HTTP with --metrics-secure=false) with its build info and
// stops cleanly on SIGTERM.
func TestBinary(t *testing.T) {
	bin := managertest.Build(t)
	kubeconfig, err := env.WriteKubeconfig("initlock-manager-binary", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	metricsAddr, probeAddr := kubeenv.FreeAddress(t), kubeenv.FreeAddress(t)
	cmd := exec.CommandContext(t.Context(), bin,
		"--kubeconfig="+kubeconfig,
		"--namespace="+ns,
		"--leader-elect",
		"--leader-election-namespace="+ns,
		"--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address="+probeAddr,
		"--orphan-grace=10m",
		"--release-after-init=true",
		"--concurrency=2",
		"--kube-api-qps=50",
		"--kube-api-burst=100",
		"--zap-log-level=info",
		"--metrics-secure=false",
		"--relink-secrets",
		"--leader-elect-lease-duration=20s",
		"--leader-elect-renew-deadline=15s",
		"--leader-elect-retry-period=1s",
	)
	proc := kubeenv.StartProcess(t, "initlock-manager", cmd)

	managertest.GetOK(t, 60*time.Second, "http://"+probeAddr+"/readyz", "")
	c := env.Client
	cluster := managertest.RestoreAndExpectAdoption(t, env, capi.V1Beta2, ns, "c1")
	if body := managertest.GetOK(t, 10*time.Second, "http://"+metricsAddr+"/metrics", ""); !strings.Contains(body, `initlock_build_info{goversion="`+runtime.Version()+`",revision="",version="v0.0.0-test"} 1`) {
		t.Errorf("/metrics has no initlock_build_info of this build:\n%s", grep(body, "initlock_build_info"))
	}

	// The relinker runs by default, and relinks Secrets with
	// --relink-secrets: a restored Secret gets its owner back.
	// It was restored with the Cluster, by the same restore.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig",
		Labels:      map[string]string{capi.ClusterNameLabel: "c1", velerov1.RestoreNameLabel: cluster.GetLabels()[velerov1.RestoreNameLabel]},
		Annotations: map[string]string{relink.Annotation: `[{"apiVersion":"` + cluster.GetAPIVersion() + `","kind":"Cluster","name":"c1"}]`}}}
	managertest.Create(t, c, secret)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		got := &corev1.Secret{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(secret), got); err != nil {
			return err
		}
		refs := got.OwnerReferences
		if len(refs) != 1 || refs[0].UID != cluster.GetUID() {
			return fmt.Errorf("restored secret's ownerReferences = %+v, want the cluster", refs)
		}
		if _, ok := got.Annotations[relink.Annotation]; ok {
			return errors.New("the relinker left its annotation on the linked secret")
		}
		return nil
	})

	proc.Terminate(t, 30*time.Second)
}

func grep(s, substr string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
