// Command kubectl-initlock is the kubectl plugin that shows and repairs the
// Cluster API control-plane init locks of a management cluster. Put it on
// the PATH and run "kubectl initlock". See package internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/initlock/initlock/internal/cli"
)

func main() {
	// The library logs through controller-runtime and client-go; the plugin
	// reports through its output and errors instead.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, cli.Options{
		IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
