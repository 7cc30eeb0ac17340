//go:build release

package release_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	veleroplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/veleroinstall"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/velero"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/test/managertest"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	// Velero's plugin registry also asks its own executable, here the test
	// binary, for built-in plugins: answer that there are none.
	if os.Getenv(framework.Handshake().MagicCookieKey) == framework.Handshake().MagicCookieValue {
		framework.NewServer().Serve()
		os.Exit(0)
	}
	kubeenv.Main(m, kubeenv.Options{}, &env)
}

// command runs the image's entrypoint with args as a container runtime
// would: as the image's user, in a chroot of the image's root folder, when
// the test runs as root; otherwise as the test's user, from the root
// folder, with the entrypoint's absolute paths moved into it.
func (u unpacked) command(t *testing.T, args ...string) *exec.Cmd {
	argv := append(slices.Clone(u.config.Config.Entrypoint), args...)
	if os.Geteuid() != 0 {
		for i, a := range argv {
			if flag, path, ok := strings.Cut(a, "=/"); ok {
				argv[i] = flag + "=" + filepath.Join(u.root, path)
			}
		}
		argv[0] = filepath.Join(u.root, argv[0])
		return exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	}
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: u.root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	return cmd
}

// static checks that the binary at path needs no dynamic loader.
func static(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
}

// TestReleaseManagerImage runs initlock-manager from its image as the
// patched install of docs/install.md runs it, with the operator's metrics
// certificate in --metrics-cert-dir: it reports the release version, heals
// a lock on the local control plane, serves its metrics only over HTTPS,
// only to authenticated clients, and to a scrape made as the ServiceMonitor
// of monitoring.yaml makes it (that certificate's CA and server name, the
// token of its ServiceAccount), and stops on SIGTERM.
func TestReleaseManagerImage(t *testing.T) {
	u := unpack(t, "initlock-manager")
	u.check(t, []string{"/initlock-manager"}, "initlock-manager")
	static(t, filepath.Join(u.root, "initlock-manager"))

	out, err := u.command(t, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "initlock-manager "+u.config.Config.Labels["org.opencontainers.image.version"]+" (") {
		t.Fatalf("--version: %q (%v)", out, err)
	}

	kubeconfig, err := env.WriteKubeconfig("initlock-manager-image", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(u.root, "kubeconfig"), b, 0o644); err != nil { //nolint:gosec // read by the image's user
		t.Fatal(err)
	}
	// The Secret of the operator's certificate, where the patched
	// Deployment mounts it.
	certDir := metricsCertDir(t)
	ca := servingCert(t, filepath.Join(u.root, certDir), str(t, endpoint(t), "tlsConfig", "serverName"))

	ns := env.Namespace(t)
	metricsAddr, probeAddr := kubeenv.FreeAddress(t), kubeenv.FreeAddress(t)
	cmd := u.command(t, "--kubeconfig=/kubeconfig", "--namespace="+ns, "--leader-elect", "--leader-election-namespace="+ns,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probeAddr, "--metrics-cert-dir="+certDir)
	if os.Geteuid() != 0 {
		cmd.Args[1] = "--kubeconfig=" + filepath.Join(u.root, "kubeconfig")
	}
	proc := kubeenv.StartProcess(t, "initlock-manager", cmd)

	kubeenv.Eventually(t, 60*time.Second, func() error { return status(t, "http://"+probeAddr+"/readyz", http.StatusOK) })
	managertest.RestoreAndExpectAdoption(t, env, capi.V1Beta2, ns, "c1")
	// Secure by default: HTTPS, and no metrics without a token.
	kubeenv.Eventually(t, 10*time.Second, func() error { return status(t, "https://"+metricsAddr+"/metrics", http.StatusUnauthorized) })
	if err := status(t, "http://"+metricsAddr+"/metrics", http.StatusOK); err == nil {
		t.Error("the metrics are served over plain HTTP")
	}
	// As the ServiceMonitor scrapes: the certificate verified, the token.
	s := monitoringScraper(t, ns, ca)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		body, err := get(t, "https://"+metricsAddr+"/metrics", s, http.StatusOK)
		if err == nil && !strings.Contains(body, "initlock_build_info{") {
			err = fmt.Errorf("the scrape has no initlock_build_info:\n%s", body)
		}
		return err
	})
	// Without the CA, the certificate is not trusted.
	if _, err := get(t, "https://"+metricsAddr+"/metrics", scraper{tls: &tls.Config{ServerName: s.tls.ServerName, MinVersion: tls.VersionTLS12}, token: s.token}, http.StatusOK); err == nil {
		t.Error("the manager's certificate is trusted without the operator's CA")
	}

	proc.Terminate(t, 30*time.Second)
}

// TestReleasePluginImage runs the Velero plugin image as "velero plugin
// add" does, as an init container with an empty folder mounted at /target,
// then loads the plugin binary it copied there the way the Velero server
// does, over go-plugin's gRPC, and runs an action through it (which reads
// its settings from the API server).
func TestReleasePluginImage(t *testing.T) {
	u := unpack(t, "velero-plugin-initlock")
	u.check(t, []string{"/copy-plugins", "-from=/plugins", "-to=/target"}, "copy-plugins", "plugins/", "plugins/velero-plugin-initlock")
	static(t, filepath.Join(u.root, "copy-plugins"))
	static(t, filepath.Join(u.root, "plugins", "velero-plugin-initlock"))

	target := filepath.Join(u.root, "target")
	if err := os.Mkdir(target, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o777); err != nil { // an emptyDir volume
		t.Fatal(err)
	}
	out, err := u.command(t).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "copied velero-plugin-initlock into ") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("entrypoint: %q (%v)", out, err)
	}
	want, err := os.ReadFile(filepath.Join(u.root, "plugins", "velero-plugin-initlock"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(target, "velero-plugin-initlock"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("/target/velero-plugin-initlock: %d bytes (%v), want the %d bytes of /plugins", len(got), err, len(want))
	}
	if entries, _ := os.ReadDir(target); len(entries) != 1 {
		t.Fatalf("/target holds %d entries, want the plugin only", len(entries))
	}

	// The plugin reads its settings ConfigMap in Velero's namespace, with
	// the kubeconfig and namespace Velero gives it.
	kubeconfig, err := env.WriteKubeconfig("velero", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("VELERO_NAMESPACE", env.Namespace(t))
	log := logrus.New()
	log.SetOutput(&bytes.Buffer{})
	registry := process.NewRegistry(target, log, logrus.InfoLevel)
	if err := registry.DiscoverPlugins(); err != nil {
		t.Fatalf("discovering plugins: %v", err)
	}
	mgr := clientmgmt.NewManager(log, logrus.InfoLevel, registry)
	t.Cleanup(mgr.CleanupClients)
	actions, err := mgr.GetRestoreItemActionsV2()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range actions {
		names = append(names, a.Name())
	}
	if !slices.Equal(names, []string{velero.ActionName, velero.LabelledActionName}) {
		t.Fatalf("the plugin serves %v", names)
	}
	action, err := mgr.GetRestoreItemActionV2(velero.ActionName)
	if err != nil {
		t.Fatal(err)
	}
	backedUp := kubeenv.NewMachine(capi.V1Beta2, "ns", "c1", "c1-cp-0")
	backedUp.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: "MachineSet", Name: "ms-0",
		UID: "2b1e0c1e-0000-4000-8000-000000000001", Controller: new(true)}})
	item := backedUp.DeepCopy()
	item.SetOwnerReferences(nil)
	res, err := action.Execute(&veleroplugin.RestoreItemActionExecuteInput{Item: item, ItemFromBackup: backedUp})
	if err != nil {
		t.Fatalf("Execute over gRPC: %v", err)
	}
	ann := res.UpdatedItem.(*unstructured.Unstructured).GetAnnotations()[relink.Annotation]
	if want := `{"version":2,"owners":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"ms-0","uid":"2b1e0c1e-0000-4000-8000-000000000001","controller":true}]}`; ann != want {
		t.Fatalf("annotation = %s, want %s", ann, want)
	}
}

// status checks that GET url, the certificate not verified, answers with
// the status code want.
func status(t *testing.T, url string, want int) error {
	_, err := get(t, url, scraper{tls: &tls.Config{InsecureSkipVerify: true}}, want) //nolint:gosec // the manager's self-signed certificate
	return err
}

// get gets url over s.tls, with s.token when it is not empty, and returns
// the body of an answer with the status code want.
func get(t *testing.T, url string, s scraper, want int) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: s.tls}}).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != want {
		err = fmt.Errorf("GET %s: %s, want %d: %s", url, resp.Status, want, body)
	}
	return string(body), err
}

// The plugin reference of the release notes is one Velero accepts: the
// init container "velero plugin add" makes of it with Velero's own code is
// valid on the API server.
func TestReleaseNotesPluginReference(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(distDir(t), "release-notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`velero plugin add (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("release-notes.md has no velero plugin add:\n%s", b)
	}
	ns := env.Namespace(t)
	d := veleroinstall.Deployment(ns)
	c := veleroinstall.AddPlugin(d, string(m[1]))
	if err := env.Client.Create(t.Context(), d, client.DryRunAll); err != nil || c.Name != "initlock-velero-plugin-initlock" {
		t.Fatalf("velero plugin add %s: init container %q: %v", m[1], c.Name, err)
	}
}
