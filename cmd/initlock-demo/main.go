// Command initlock-demo shows, on a real local control plane, what initlock
// fixes in Cluster API's control-plane init lock: a lock re-adopted after a
// Velero restore and garbage-collected with its Cluster, and a lock released
// once a single-node cluster is initialised. See internal/demo. With --real
// it tells the seed's story on the real Velero server and Cluster API
// controllers instead (make demo-real).
//
// It exits 0 when every step passed, 1 when a step failed and 130 when it
// was interrupted. Ctrl-C always stops every process it started and removes
// its temporary files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/initlock/initlock/internal/demo"
)

// startTimeoutEnv sets how long envtest waits for etcd and kube-apiserver
// to start.
const startTimeoutEnv = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("initlock-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts demo.Options
	verbose := fs.Bool("v", false, "Print the logs of initlock-manager and the client libraries to stderr.")
	fs.BoolVar(&opts.Keep, "keep", false, "Leave the control plane and initlock-manager running after the story, print a kubeconfig and commands to try, and wait for Ctrl-C.")
	fs.DurationVar(&opts.OrphanGrace, "orphan-grace", 0, "Orphan grace period of initlock-manager (default 5s).")
	realStack := fs.Bool("real", false, "Tell the seed's story on the real Velero server, CAPI core and CABPK (make demo-real, which builds what it needs).")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *realStack && opts.Keep {
		_, _ = fmt.Fprintln(stderr, "initlock-demo: --keep is not available with --real")
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "initlock-demo: unexpected arguments %q\n", fs.Args())
		return 2
	}
	// envtest gives each control-plane process 20 s to start by default;
	// a busy machine may need more.
	if os.Getenv(startTimeoutEnv) == "" {
		if err := os.Setenv(startTimeoutEnv, "2m"); err != nil {
			_, _ = fmt.Fprintf(stderr, "initlock-demo: %v\n", err)
			return 1
		}
	}
	opts.Out = stdout
	opts.Colour = colour(stdout)
	if *verbose {
		opts.Log = stderr
	}

	// Ctrl-C and SIGTERM cancel the context; further signals are caught
	// too, so that a second Ctrl-C cannot cut the clean-up short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	runDemo := demo.Run
	if *realStack {
		runDemo = demo.RunReal
	}
	err := runDemo(ctx, opts)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, demo.ErrInterrupted):
		_, _ = fmt.Fprintf(stderr, "initlock-demo: %v\n", err)
		return 130
	default:
		_, _ = fmt.Fprintf(stderr, "initlock-demo: %v\n", err)
		return 1
	}
}

// colour tells whether to paint the output: on a terminal, unless NO_COLOR
// is set or TERM is dumb.
func colour(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
