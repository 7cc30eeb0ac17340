//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
)

var (
	// source is the management cluster the scenarios start in; target is
	// the second one, with its own Velero server on the same bucket.
	source, target *stack.Mgmt
	s3             *stack.S3
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	kubeenv.SetupTestLogger()
	// An empty KUBEBUILDER_ASSETS, left by a failed $(hack/kube.sh), would
	// make envtest look for etcd in PATH; unset, kubeenv uses the cache.
	if v, ok := os.LookupEnv("KUBEBUILDER_ASSETS"); ok && v == "" {
		_ = os.Unsetenv("KUBEBUILDER_ASSETS")
	}
	bins, err := stack.FindBinaries()
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	start := time.Now()
	stop := func() error { return nil }
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = stop()
		os.Exit(1)
	}()
	defer func() {
		signal.Stop(sigs)
		if err := stop(); err != nil {
			fmt.Fprintf(os.Stderr, "real: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	s3Dir, err := os.MkdirTemp("", "initlock-real-s3-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(s3Dir) }()
	if s3, err = stack.StartS3(ctx, bins, s3Dir, "initlock-backups"); err != nil {
		return fail(err)
	}
	stop = func() error { s3.Stop(); return nil }
	// One after the other: starting both at once only makes them compete
	// for the same cores.
	if source, err = stack.StartMgmt(ctx, bins, stack.Options{Name: "source", S3: s3, Webhooks: true, OwnerReferencesPermissionEnforcement: true}); err != nil {
		return fail(errors.Join(err, stop()))
	}
	stop = func() error { err := source.Stop(); s3.Stop(); return err }
	if target, err = stack.StartMgmt(ctx, bins, stack.Options{Name: "target", S3: s3, Webhooks: true, OwnerReferencesPermissionEnforcement: true}); err != nil {
		return fail(errors.Join(err, stop()))
	}
	stop = func() error {
		err := errors.Join(target.Stop(), source.Stop())
		s3.Stop()
		return err
	}
	fmt.Printf("real: S3 server at %s; two management clusters with CAPI core and CABPK %s and their webhooks started in %.1fs\n",
		s3.URL, stack.CAPIVersion, time.Since(start).Seconds())
	code = m.Run()
	fmt.Println("real: results")
	for _, r := range results {
		fmt.Println("  " + r)
	}
	return code
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "real: %v\n", err)
	return 1
}

// result prints a scenario's one result line.
func result(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log("RESULT " + line)
	results = append(results, t.Name()+": "+line)
}

var results []string
