// Command initlock-manager runs the initlock manager: the controller that
// keeps Cluster API control-plane init locks owned, released after init and
// collected when orphaned (see internal/manager), and the relinker, which
// gives restored objects back the ownerReferences a Velero restore dropped
// (see internal/relink; --relink=false turns it off).
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/internal/relink"
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
	relinkOn := flag.Bool("relink", true, "Run the relinker: link objects restored with the "+relink.Annotation+
		" annotation (written by the Velero plugin) to their owners' current UIDs.")
	relinkKinds := flag.String("relink-kinds", "", "Comma-separated kinds the relinker relinks and watches as owners, "+
		"written Kind.group or Kind.version.group (Kind for the core group); empty is the Cluster API core kinds, ConfigMaps and Secrets.")
	// ctrl.GetConfig reads --kubeconfig, registered by controller-runtime.
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: initlock-manager takes flags only", flag.Args())
	}
	if *relinkOn {
		ro := relink.Options{Namespace: opts.Namespace}
		if *relinkKinds != "" {
			kinds, err := relink.ParseKinds(*relinkKinds)
			if err != nil {
				return fmt.Errorf("--relink-kinds: %w", err)
			}
			ro.Kinds = kinds
		}
		opts.Setups = append(opts.Setups, relink.ManagerSetup(ro))
	}

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
		"releaseAfterInit", opts.ReleaseAfterInit, "leaderElection", opts.LeaderElection, "relink", *relinkOn)
	return mgr.Start(ctrl.SetupSignalHandler())
}
