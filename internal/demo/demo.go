package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/relink/secrets"
	"github.com/initlock/initlock/pkg/initlock"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Options configure Run.
type Options struct {
	// Out receives the timeline; required.
	Out io.Writer
	// Log receives the logs of initlock-manager and the client libraries;
	// nil discards them.
	Log io.Writer
	// Colour paints PASS, FAIL and the headings with ANSI colours.
	Colour bool
	// Keep leaves the control plane and the manager running after the
	// story, until the context is cancelled.
	Keep bool
	// OrphanGrace of the manager; 5 s when zero.
	OrphanGrace time.Duration
	// OrphanSettle of the manager; 1 s when zero.
	OrphanSettle time.Duration
	// Timeout bounds every wait for the control plane or the manager to
	// act; 2 minutes when zero.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.OrphanGrace == 0 {
		o.OrphanGrace = 5 * time.Second
	}
	if o.OrphanSettle == 0 {
		o.OrphanSettle = time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	return o
}

var (
	// ErrFailed is returned when a step failed.
	ErrFailed = errors.New("a step of the demo failed")
	// ErrInterrupted is returned when the context was cancelled before
	// the story was told.
	ErrInterrupted = errors.New("the demo was interrupted")

	errInterrupted = fmt.Errorf("%w (Ctrl-C)", ErrInterrupted)
)

// demo is one run.
type demo struct {
	ctx  context.Context
	opts Options
	tl   *timeline
	log  logr.Logger

	env *kubeenv.Env
	c   client.Client
	// capiVersion is the Cluster API version served, v1beta2.
	capiVersion string
	locker      *initlock.Locker
	// kubeconfig of an admin, for the kubectl plugin and for Keep.
	kubeconfig string

	mgrCancel   context.CancelFunc
	mgrDone     chan error
	metricsAddr string
	// lockWrites counts the manager's writes to ConfigMaps.
	lockWrites *writeCounter
}

// Run tells the story on a fresh local control plane and cleans everything
// up before it returns. See the package documentation.
func Run(ctx context.Context, opts Options) (retErr error) {
	opts = opts.withDefaults()
	d := &demo{ctx: ctx, opts: opts, tl: newTimeline(ctx, opts.Out, opts.Colour), lockWrites: &writeCounter{}}
	d.log = setLoggers(opts.Log)
	defer func() { retErr = errors.Join(retErr, d.stop()) }()

	d.tl.printf("%s\n", d.tl.paint(bold, "initlock demo: Cluster API's control-plane init lock, on a real local control plane"))
	d.tl.printf("   Nothing is installed on this machine; everything runs in this process and its children and is removed at the end.\n")

	d.tl.begin("setup", "A local management cluster",
		"etcd, kube-apiserver and kube-controller-manager (garbage collector, namespace controller),",
		"the Cluster API CRDs, and initlock-manager running in this process.")
	ok := d.tl.step("Control-plane binaries: etcd "+kubeenv.EtcdVersion+", kube-apiserver and kube-controller-manager "+kubeenv.KubeVersion, d.binaries) &&
		d.tl.step("Start etcd, kube-apiserver, the Cluster API CRDs and kube-controller-manager", d.startControlPlane) &&
		d.tl.step(fmt.Sprintf("Start initlock-manager in this process (orphan grace %s)", opts.OrphanGrace), d.startManager)
	if ok {
		d.seedScenario()
		d.singleNode()
		d.objectGraph()
		d.managerMetrics()
	}
	d.tl.summary()

	if ok && opts.Keep && ctx.Err() == nil {
		d.keep()
	}
	return d.tl.err()
}

// setLoggers points controller-runtime's and klog's loggers at w, or at
// nothing.
func setLoggers(w io.Writer) logr.Logger {
	l := logr.Discard()
	if w != nil {
		l = zap.New(zap.WriteTo(w), zap.UseDevMode(true))
	}
	ctrl.SetLogger(l)
	klog.SetLogger(l)
	return l
}

// binaries makes sure the control-plane binaries are in the cache, building
// them with hack/kube.sh (what make kube runs) when they are not.
func (d *demo) binaries(n note) error {
	dir, err := kubeenv.AssetsDir()
	if err == nil {
		n("found in %s", dir)
		return nil
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		return err
	}
	root, rerr := kubeenv.RepoRoot()
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	n("not built yet: building them from Go modules with hack/kube.sh, as make kube does")
	n("this happens once; measured on 2 cores: etcd about 75 s, kube-apiserver and kube-controller-manager")
	n("about 12 to 17 minutes and 3 GB of memory; later runs reuse them")
	cmd := exec.CommandContext(d.ctx, filepath.Join(root, "hack", "kube.sh"))
	cmd.Dir = root
	cmd.Stdout = io.Discard
	cmd.Stderr = &indented{w: d.opts.Out, prefix: strings.Repeat(" ", 13)}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the control plane with hack/kube.sh: %w", err)
	}
	dir, err = kubeenv.AssetsDir()
	if err != nil {
		return err
	}
	n("built into %s", dir)
	return nil
}

func (d *demo) startControlPlane(n note) error {
	env, err := kubeenv.Start(kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true})
	if err != nil && d.ctx.Err() == nil {
		// A busy machine can make kube-apiserver miss envtest's start
		// deadlines; Start has stopped everything it started.
		n("the control plane did not start: %v", err)
		n("trying once more")
		env, err = kubeenv.Start(kubeenv.Options{CAPI: kubeenv.CAPIV1Beta2, LockGuard: true})
	}
	if err != nil {
		return err
	}
	d.env = env
	d.c = env.Client
	if err := d.ctx.Err(); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return fmt.Errorf("building a discovery client: %w", err)
	}
	if d.capiVersion, err = capi.Discover(dc); err != nil {
		return err
	}
	d.locker = initlock.New(d.c)
	if d.kubeconfig, err = env.WriteKubeconfig("demo-admin", []string{"system:masters"}); err != nil {
		return err
	}
	n("kube-apiserver %s at %s, etcd %s", kubeenv.KubeVersion, env.Config.Host, kubeenv.EtcdVersion)
	n("Cluster API %s CRDs installed; %s/%s served", capiRelease(), capi.Group, d.capiVersion)
	n("kube-controller-manager runs the garbage collector and the namespace controller")
	return nil
}

// capiRelease returns the release of the Cluster API CRDs installed, from
// the folder of the pinned module (".../cluster-api@v1.14.2/...").
func capiRelease() string {
	dirs, err := kubeenv.CRDDirs(kubeenv.CAPIV1Beta2)
	if err != nil || len(dirs) == 0 {
		return "(unknown release)"
	}
	_, after, ok := strings.Cut(dirs[0], "cluster-api@")
	if !ok {
		return "(unknown release)"
	}
	release, _, _ := strings.Cut(after, string(filepath.Separator))
	return release
}

func (d *demo) startManager(n note) error {
	addr, err := freeAddress()
	if err != nil {
		return err
	}
	opts := manager.DefaultOptions()
	opts.MetricsBindAddress, opts.MetricsSecure = addr, false
	opts.HealthProbeBindAddress = "0"
	opts.OrphanGrace = d.opts.OrphanGrace
	opts.OrphanSettle = d.opts.OrphanSettle
	opts.Logger = d.log.WithName("initlock-manager")
	// The relinker runs in the manager's process, added through Setups.
	// The story's graph has a kubeconfig Secret: relink Secrets too.
	opts.Setups = append(opts.Setups, relink.ManagerSetup(secrets.Enable(relink.Options{})))
	mgr, err := manager.New(d.lockWrites.wrap(d.env.Config), opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(d.ctx))
	d.mgrCancel, d.mgrDone, d.metricsAddr = cancel, make(chan error, 1), addr
	go func() { d.mgrDone <- mgr.Start(ctx) }()

	// Running once its metrics are served and its cache has synced.
	err = poll(d.ctx, d.opts.Timeout, func(ctx context.Context) error {
		select {
		case err := <-d.mgrDone:
			d.mgrDone <- err
			return fmt.Errorf("%w: initlock-manager stopped: %w", errStop, err)
		default:
		}
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("cache not synced")
		}
		_, err := scrape(ctx, addr)
		return err
	})
	if err != nil {
		return err
	}
	n("watching all namespaces: lock ConfigMaps (by label), Clusters and Machine metadata")
	n("with the relinker, added through manager.Options.Setups (relink.ManagerSetup)")
	n("release after init: %t; orphan grace %s; metrics on http://%s/metrics", opts.ReleaseAfterInit, opts.OrphanGrace, addr)
	return nil
}

// keep leaves everything running until the context is cancelled.
func (d *demo) keep() {
	p := d.tl.printf
	p("\n%s\n", d.tl.paint(bold, "== The control plane and initlock-manager keep running =="))
	p("   export KUBECONFIG=%s\n", d.kubeconfig)
	p("   kubectl get clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io -A\n")
	p("   kubectl get configmaps -A -l %s --show-labels\n", wire.ClusterNameLabel)
	p("   kubectl get events.events.k8s.io -A -o custom-columns=REASON:.reason,OBJECT:.regarding.name,NOTE:.note\n")
	p("   curl -s http://%s/metrics | grep ^initlock_\n", d.metricsAddr)
	p("   The kubectl plugin, from the repository root:\n")
	p("   go build -o bin/kubectl-initlock ./cmd/kubectl-initlock && export PATH=$PWD/bin:$PATH\n")
	p("   kubectl initlock list -A --show-free\n")
	p("   kubectl initlock repair -A --dry-run=client\n")
	p("   Press Ctrl-C to stop everything and remove the temporary files.\n")
	<-d.ctx.Done()
	p("\nInterrupted.\n")
}

// stop stops the manager, then the control plane, and removes its folders.
func (d *demo) stop() error {
	if d.mgrCancel == nil && d.env == nil {
		return nil
	}
	started := time.Now()
	var errs []error
	if d.mgrCancel != nil {
		d.mgrCancel()
		select {
		case err := <-d.mgrDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("initlock-manager: %w", err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("initlock-manager did not stop within 30s"))
		}
		d.mgrCancel = nil
	}
	dir := ""
	if d.env != nil {
		dir = d.env.Dir
		if err := d.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		d.tl.printf("\nCleaning up failed: %v\n", err)
		return err
	}
	d.tl.printf("\nStopped initlock-manager, kube-controller-manager, kube-apiserver and etcd, and removed %s (%s).\n", dir, duration(time.Since(started)))
	return nil
}

// freeAddress returns a local address with a port that is free now.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port for the metrics: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// indented writes each line with a prefix.
type indented struct {
	w      io.Writer
	prefix string
	mid    bool
}

func (i *indented) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if !i.mid {
			if _, err := io.WriteString(i.w, i.prefix); err != nil {
				return 0, err
			}
		}
		if _, err := io.WriteString(i.w, line); err != nil {
			return 0, err
		}
		i.mid = !strings.HasSuffix(line, "\n")
	}
	return len(p), nil
}

var _ io.Writer = (*indented)(nil)
