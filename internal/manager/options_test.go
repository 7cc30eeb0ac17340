package manager_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/initlock/initlock/internal/manager"
)

// The default options are valid; flags parsed by BindFlags land in the
// options; Validate names every bad value with the flag that sets it,
// before anything connects to an API server.
func TestOptions(t *testing.T) {
	if err := manager.DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
	o := manager.DefaultOptions()
	fs := flag.NewFlagSet("initlock-manager", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--namespace=capi", "--orphan-grace=1h", "--release-after-init=false", "--kube-api-qps=7.5",
		"--watch-filter=fleet-a", "--leader-elect", "--leader-elect-lease-duration=20s"}); err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "capi" || o.OrphanGrace != time.Hour || o.ReleaseAfterInit || o.KubeAPIQPS != 7.5 ||
		o.WatchFilter != "fleet-a" || !o.LeaderElection || o.LeaseDuration != 20*time.Second {
		t.Errorf("parsed options: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("parsed options: %v", err)
	}

	for _, tc := range []struct {
		change func(*manager.Options)
		want   string
	}{
		{func(o *manager.Options) { o.OrphanGrace = 0 }, "--orphan-grace must be positive"},
		{func(o *manager.Options) { o.OrphanSettle = -time.Second }, "--orphan-settle must not be negative"},
		{func(o *manager.Options) { o.Concurrency = -1 }, "--concurrency must not be negative"},
		{func(o *manager.Options) { o.KubeAPIBurst = -1 }, "--kube-api-qps and --kube-api-burst must not be negative"},
		{func(o *manager.Options) { o.EventQPS = -1 }, "--event-qps and --event-burst must not be negative"},
		{func(o *manager.Options) { o.MetricsBindAddress = "8080" }, `--metrics-bind-address="8080" is not host:port or 0`},
		{func(o *manager.Options) { o.LeaderElection, o.LeaderElectionID = true, "" }, "leader election needs a Lease name"},
		{func(o *manager.Options) { o.LeaseDuration = 5 * time.Second }, "--leader-elect-lease-duration (5s) must be longer than --leader-elect-renew-deadline (10s)"},
		{func(o *manager.Options) { o.RetryPeriod = -time.Second }, "--leader-elect-retry-period must not be negative"},
		{func(o *manager.Options) { o.WatchFilter = "not a label" }, `--watch-filter="not a label" is not a label value`},
	} {
		o := manager.DefaultOptions()
		tc.change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "invalid initlock manager options: ") {
			t.Errorf("Validate: %v, want an error naming %q", err, tc.want)
		}
	}
}
