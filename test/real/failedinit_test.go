//go:build real

package real_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/kubeenv/stack"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// failedInitWait bounds each wait for init data once the failure is fixed
// (the Secret exists) or its Machine is gone: CABPK's error backoff on a
// failing KubeadmConfig and its 30 s requeue of a Machine refused the lock.
const failedInitWait = 3 * time.Minute

// failedWatch is how long cp-1 is watched while cp-0 keeps failing.
const failedWatch = 30 * time.Second

// failedMode is how initlock is installed for a failed-init scenario.
type failedMode struct {
	name string
	// install starts initlock; nil for upstream alone.
	install func(t *testing.T)
	// current marks the build and install under test: its outcome is
	// asserted.
	current bool
}

// failedOutcome is what a failed generation of cp-0's init data came to.
type failedOutcome struct {
	mode, scenario string
	// dataAfter is, once the Secret is created (fixed later), the time
	// until cp-0's init data; once cp-0 is deleted (permanent failure),
	// the time until cp-1's. 0 when none came within failedInitWait.
	dataAfter time.Duration
	// secondInit is when cp-1 got init data after it was created (0:
	// never), and whileFirst whether cp-0 existed then.
	secondInit time.Duration
	whileFirst bool
	// refused counts CABPK's deletes of the lock the API server refused.
	refused int
}

func (o failedOutcome) String() string {
	who, after := "cp-0", "the Secret was created"
	if o.scenario == scenarioPermanent {
		who, after = "cp-1", "cp-0 was deleted"
	}
	var s string
	switch {
	case o.secondInit > 0 && o.whileFirst:
		s = fmt.Sprintf("%s: cp-1 got init data %s after it was created, while cp-0 existed", o.mode, o.secondInit.Round(time.Millisecond))
		if o.scenario == scenarioFixedLater {
			s += ", and cp-0 none once " + after
		}
	case o.dataAfter > 0:
		s = fmt.Sprintf("%s: %s got its init data %s after %s", o.mode, who, o.dataAfter.Round(time.Millisecond), after)
	default:
		s = fmt.Sprintf("%s: %s got no init data within %s of when %s", o.mode, who, failedInitWait, after)
	}
	if o.secondInit > 0 && !o.whileFirst {
		s += fmt.Sprintf(" (%s after cp-1 was created)", o.secondInit.Round(time.Millisecond))
	}
	return s + fmt.Sprintf("; CABPK's deletes of the lock refused: %d", o.refused)
}

const (
	scenarioFixedLater = "missing Secret created later"
	scenarioPermanent  = "permanent failure, then the Machine deleted"
)

// runFailedInit: cp-0's KubeadmConfig names a file from a Secret that does
// not exist, so CABPK takes the lock for cp-0, fails to generate its init
// data and releases the lock (its Unlock deletes it), again and again. A
// second control-plane Machine cp-1, whose data needs nothing missing, is
// added and watched for failedWatch. Then the failure ends: the Secret is
// created (scenarioFixedLater), or cp-0 is deleted (scenarioPermanent).
func runFailedInit(t *testing.T, mode failedMode, scenario string) failedOutcome {
	ctx := t.Context()
	o := failedOutcome{mode: mode.name, scenario: scenario}
	ns := source.Env.Namespace(t)
	const cluster, cp0, cp1, secret = "failed", "failed-cp-0", "failed-cp-1", "failed-files"
	must(t, source.CreateCluster(ctx, ns, cluster, stack.ClusterOptions{}))
	must(t, source.CreateMachineWithConfig(ctx, ns, cluster, cp0, true, map[string]any{
		"files": []any{map[string]any{
			"path":        "/etc/initlock-test",
			"contentFrom": map[string]any{"secret": map[string]any{"name": secret, "key": "value"}},
		}},
	}))
	eventually(t, 60*time.Second, func(ctx context.Context) error {
		kc, err := source.Get(ctx, stack.KubeadmConfigGVK, ns, cp0)
		if err != nil || kc == nil {
			return fmt.Errorf("no KubeadmConfig (%w)", err)
		}
		if !strings.Contains(fmt.Sprint(kc.Object["status"]), "DataSecretGenerationFailed") {
			return errors.New("CABPK has not reported the failure yet")
		}
		return nil
	})
	must(t, source.CreateMachine(ctx, ns, cluster, cp1, true))
	cp1Created := time.Now()
	// watch records cp-1's init data, and whether cp-0 existed then.
	watch := func(ctx context.Context) error {
		if o.secondInit > 0 || hasInitData(source, ns, cp1)(ctx) != nil {
			return nil
		}
		o.secondInit = time.Since(cp1Created)
		m, err := source.Get(ctx, stack.MachineGVK, ns, cp0)
		o.whileFirst = m != nil
		return err
	}
	_ = stack.Poll(ctx, failedWatch, func(ctx context.Context) error {
		must(t, watch(ctx))
		return errors.New("watching")
	})

	start := time.Now()
	var done func(context.Context) error
	switch scenario {
	case scenarioFixedLater:
		must(t, source.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Data:       map[string][]byte{"value": []byte("initlock")},
		}))
		done = hasInitData(source, ns, cp0)
	case scenarioPermanent:
		m, err := source.Get(ctx, stack.MachineGVK, ns, cp0)
		must(t, err)
		must(t, source.Client.Delete(ctx, m))
		done = hasInitData(source, ns, cp1)
	}
	err := stack.Poll(ctx, failedInitWait, func(ctx context.Context) error {
		must(t, watch(ctx))
		if scenario == scenarioFixedLater && o.secondInit > 0 {
			// cp-1 holds the lock now: cp-0 waits for it for good.
			return nil
		}
		return done(ctx)
	})
	if err == nil && done(ctx) == nil {
		o.dataAfter = time.Since(start)
	}
	o.refused = guardRefusals(t, source, userCABPK, ns, cluster+wire.LockSuffix)
	t.Logf("%s, %s", scenario, o)
	return o
}

// TestFailedInitReleased: CABPK fails to generate cp-0's init data (a file
// from a Secret that does not exist) and releases the lock after each
// failure; upstream, that release lets another Machine in. With initlock's
// lock guard, CABPK's release is refused: the lock keeps naming cp-0,
// which retries under it and gets its data once the Secret exists; after a
// failure that does not end, the lock goes once cp-0 is deleted
// (initlock-manager's release of a lock whose holder is gone), and only
// then does cp-1 get its data. With $INITLOCK_BASELINE_MANAGER an earlier
// build is measured the same way, and only reported.
func TestFailedInitReleased(t *testing.T) {
	modes := []failedMode{
		{name: "upstream"},
		// The lock is some 30 s old when cp-0 is deleted: older than the
		// grace period a gone holder's lock waits for a restore to bring
		// the holder back.
		{name: "initlock-manager with the lock guard", current: true, install: func(t *testing.T) { startManager(t, source, "--orphan-grace=20s") }},
	}
	if opts, ok := baseline(); ok {
		modes = append(modes, failedMode{name: "baseline " + strings.Join(opts.Args, " "), install: func(t *testing.T) {
			must(t, source.GrantProviderKinds(t.Context()))
			must(t, source.GrantRelinkSecrets(t.Context()))
			opts.Args = append([]string{"--relink-kinds=" + stack.ProviderRelinkKinds, "--relink-secrets"}, opts.Args...)
			installManager(t, source, opts)
		}})
	}
	// Each mode is installed once; its scenarios run at once, in namespaces
	// of their own (most of their time is waiting for CABPK's retries).
	scenarios := []string{scenarioFixedLater, scenarioPermanent}
	lines := make([][]string, len(scenarios))
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			if mode.install != nil {
				mode.install(t)
			}
			outcomes := make([]failedOutcome, len(scenarios))
			t.Run("scenarios", func(t *testing.T) {
				for i, scenario := range scenarios {
					t.Run(scenario, func(t *testing.T) {
						t.Parallel()
						o := runFailedInit(t, mode, scenario)
						outcomes[i] = o
						if !mode.current {
							return
						}
						if o.dataAfter == 0 {
							t.Errorf("%s: the Machine waiting for init data did not get it: %s", mode.name, o)
						}
						if o.secondInit > 0 && o.whileFirst {
							t.Errorf("%s: cp-1 got init data while cp-0 existed: %s", mode.name, o)
						}
					})
				}
			})
			for i, o := range outcomes {
				lines[i] = append(lines[i], o.String())
			}
		})
	}
	for i, scenario := range scenarios {
		result(t, "failed init data, %s: %s", scenario, strings.Join(lines[i], "; "))
	}
}
