package demo

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/stack"
)

// The seed's names in the real story.
const (
	realNamespace  = seedNamespace
	realUpstreamNS = "demo-seed-upstream"
	realInitlockNS = "demo-seed-initlock"
	realBackup     = "demo-seed"
)

// realDemo is one run of the seed's story on the real components.
type realDemo struct {
	ctx            context.Context
	opts           Options
	tl             *timeline
	bins           stack.Binaries
	s3             *stack.S3
	source, target *stack.Mgmt
}

// RunReal tells the seed's story on the real components: the S3 server
// holding the bucket, two management clusters each with CAPI core and
// CABPK v1.14.2 (their webhooks registered) and its own Velero v1.18.3
// server, and initlock-manager and initlock's Velero plugin built from this
// work tree. The binaries come from the caches of hack/kube.sh and
// hack/stack.sh; initlock's own from $INITLOCK_MANAGER and
// $INITLOCK_VELERO_PLUGIN (make demo-real builds them). It prints each
// velero and kubectl command as a user would type it, with the same
// timeline, PASS and FAIL as Run, and stops everything it started before it
// returns.
func RunReal(ctx context.Context, opts Options) (retErr error) {
	opts = opts.withDefaults()
	setLoggers(opts.Log)
	d := &realDemo{ctx: ctx, opts: opts, tl: newTimeline(ctx, opts.Out, opts.Colour)}
	defer func() { retErr = errors.Join(retErr, d.stop()) }()
	d.tl.printf("%s\n", d.tl.paint(bold, "initlock demo on the real components: Velero, Cluster API core and CABPK, unmodified"))
	d.tl.printf("   Nothing is installed on this machine; every process runs from the cache and is stopped at the end.\n")

	d.tl.begin("setup", "Two management clusters and a bucket",
		"Each management cluster is a local control plane with the garbage collector and the namespace",
		"controller, CAPI core and CABPK "+stack.CAPIVersion+" with their webhooks, and its own Velero "+stack.VeleroVersion+" server on demand.")
	ok := d.tl.step("Binaries: Velero "+stack.VeleroVersion+", its AWS plugin "+stack.VeleroAWSVersion+", the S3 server, CABPK and core "+stack.CAPIVersion, d.binaries) &&
		d.tl.step("Start the S3 server (gofakes3, in memory) with the bucket initlock-backups", d.startS3) &&
		d.tl.step("Start management cluster 1: control plane, CAPI core, CABPK, webhooks", func(n note) error {
			return d.startMgmt(n, "cluster-1", &d.source)
		}) &&
		d.tl.step("Start management cluster 2: control plane, CAPI core, CABPK, webhooks", func(n note) error {
			return d.startMgmt(n, "cluster-2", &d.target)
		})
	if ok {
		d.seedUpstream()
		d.seedInitlock()
	}
	d.tl.summary()
	return d.tl.err()
}

func (d *realDemo) binaries(n note) error {
	if _, err := kubeenv.AssetsDir(); err != nil {
		return err
	}
	bins, err := stack.FindBinaries()
	if err != nil {
		return err
	}
	d.bins = bins
	n("found in %s", bins.Dir)
	n("initlock-manager and velero-plugin-initlock built from this work tree")
	return nil
}

func (d *realDemo) startS3(n note) error {
	dir, err := os.MkdirTemp("", "initlock-demo-s3-")
	if err != nil {
		return err
	}
	if d.s3, err = stack.StartS3(d.ctx, d.bins, dir, "initlock-backups"); err != nil {
		return err
	}
	n("listening on %s; both Velero servers use it as their backup storage location", d.s3.URL)
	return nil
}

func (d *realDemo) startMgmt(n note, name string, m **stack.Mgmt) error {
	var err error
	if *m, err = stack.StartMgmt(d.ctx, d.bins, stack.Options{Name: name, S3: d.s3, Webhooks: true}); err != nil {
		return err
	}
	n("kube-apiserver %s at %s; CAPI core and CABPK ready, their config/webhook registered", kubeenv.KubeVersion, (*m).Env.Config.Host)
	return nil
}

// stop stops both management clusters and the S3 server.
func (d *realDemo) stop() error {
	var errs []error
	for _, m := range []*stack.Mgmt{d.target, d.source} {
		if m != nil {
			errs = append(errs, m.Stop())
		}
	}
	if d.s3 != nil {
		d.s3.Stop()
		errs = append(errs, os.RemoveAll(strings.TrimSuffix(d.s3.LogPath, "/s3-server.log")))
	}
	return errors.Join(errs...)
}

// show runs a velero CLI command against m's server and prints it as a
// user would type it, with the lines of its output that contain grep (all
// when grep is empty) and its header line.
func (d *realDemo) show(n note, m *stack.Mgmt, v *stack.Velero, grep string, args ...string) error {
	command(n, "["+m.Name+"] ", append([]string{"velero"}, args...)...)
	out, err := v.CLI(d.ctx, args...)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	left := 0
	for i, l := range lines {
		if i == 0 || grep == "" || strings.Contains(l, grep) {
			n("  %s", l)
		} else {
			left++
		}
	}
	if left > 0 {
		n("  (%d lines without %q left out)", left, grep)
	}
	return nil
}

// command prints a command as a user would type it, quoting the arguments
// a shell would not take as they are.
func command(n note, cluster string, args ...string) {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if strings.ContainsAny(a, " \"'{}*$") {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	n("%s$ %s", cluster, strings.Join(quoted, " "))
}

// errNotReproduced fails a step where upstream no longer shows the seed's
// bug.
var errNotReproduced = errors.New("upstream behaves differently from the seed")
