// Command initlock-manager runs the initlock manager: the controller that
// keeps Cluster API control-plane init locks owned, released after init and
// collected when orphaned. See internal/manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/manager"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "initlock-manager: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	opts := manager.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	klogFlags.VisitAll(func(f *flag.Flag) {
		if flag.CommandLine.Lookup(f.Name) == nil {
			flag.CommandLine.Var(f.Value, f.Name, f.Usage)
		}
	})
	// ctrl.GetConfig reads --kubeconfig, registered by controller-runtime.
	flag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	opts.Logger = logger.WithName("initlock-manager")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return err
	}
	opts.Logger.Info("Starting the manager", "namespace", opts.Namespace, "orphanGrace", opts.OrphanGrace,
		"releaseAfterInit", opts.ReleaseAfterInit, "leaderElection", opts.LeaderElection)
	return mgr.Start(ctrl.SetupSignalHandler())
}
