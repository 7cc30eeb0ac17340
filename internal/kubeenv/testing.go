package kubeenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
)

// Main starts an Env for a test package, runs its tests and stops the Env.
// Call it from TestMain:
//
//	var env *kubeenv.Env
//
//	func TestMain(m *testing.M) { kubeenv.Main(m, kubeenv.Options{}, &env) }
//
// With -short, or when a test binary runs only benchmarks or fuzzing that do
// not need it, the Env is still started: every test here talks to a real API
// server. An interrupt stops the Env before the binary exits.
func Main(m *testing.M, opts Options, env **Env) {
	SetupTestLogger()
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeenv: %v\n", err)
		os.Exit(1)
	}
	*env = e
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = e.Stop()
		os.Exit(1)
	}()
	code := m.Run()
	signal.Stop(sigs)
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "kubeenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Namespace creates a fresh namespace for t and deletes it when t ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := NamespaceName(t.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		if err := e.Client.Delete(context.WithoutCancel(t.Context()), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// NamespaceName makes a valid, unique namespace name from a test name.
func NamespaceName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return base + "-" + hex.EncodeToString(suffix)
}

// Eventually calls f until it returns nil, failing t with f's last error
// when timeout passes first. It polls every 50 ms.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Consistently calls f every 50 ms for d, failing t at the first error.
func Consistently(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := f(); err != nil {
			t.Fatalf("stopped holding: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitGone waits until each of objs is gone (deleted, or collected by the
// garbage collector or the namespace controller), failing t after 30 s.
func WaitGone(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		Eventually(t, 30*time.Second, func() error {
			err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("reading %s: %w", obj.GetName(), err)
			}
			return fmt.Errorf("%s still exists", obj.GetName())
		})
	}
}

// DeleteAndWait deletes objs and waits until they are gone.
func DeleteAndWait(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Delete(t.Context(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", obj.GetName(), err)
		}
	}
	WaitGone(t, c, objs...)
}

// Discovery returns a discovery client for the Env's admin config.
func (e *Env) Discovery(t testing.TB) discovery.DiscoveryInterface {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	return dc
}

// SetupTestLogger routes controller-runtime's logs to stderr when
// INITLOCK_TEST_LOG is set (its value is the verbosity, e.g. 4) and discards
// them otherwise.
func SetupTestLogger() {
	v, ok := os.LookupEnv("INITLOCK_TEST_LOG")
	if !ok {
		ctrl.SetLogger(logr.Discard())
		return
	}
	level, _ := strconv.Atoi(v)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapcore.Level(-level))))
}

// FreeAddress returns a loopback address with a port free at the time.
func FreeAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
