// Command initlock-manager runs the initlock manager: the controller that
// keeps Cluster API control-plane init locks owned, released after init and
// collected when orphaned (see internal/manager), and the relinker, which
// gives restored objects back the ownerReferences a Velero restore dropped
// (see internal/relink; --relink=false turns it off).
//
// Every flag is checked before the manager connects to the API server: a
// bad value, like a kubeconfig that cannot be loaded, ends the process with
// one line on stderr and exit code 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/internal/relink/secrets"
	"github.com/initlock/initlock/internal/version"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "initlock-manager: %v\n", oneLine(err))
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	c, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	if c.version {
		_, err := fmt.Fprintf(stdout, "initlock-manager %s\n", version.Get())
		return err
	}
	opts := c.opts
	if err := opts.Validate(); err != nil {
		return err
	}
	// An observe-only manager writes to no object: no relinker.
	if c.relink && !opts.ObserveOnly {
		ro := relink.Options{Namespace: opts.Namespace, WatchFilter: opts.WatchFilter}
		if c.relinkKinds != "" {
			if ro.Kinds, err = relink.ParseKinds(c.relinkKinds); err != nil {
				return fmt.Errorf("--relink-kinds: %w", err)
			}
			if !c.relinkSecrets && slices.ContainsFunc(ro.Kinds, func(k schema.GroupVersionKind) bool { return k.Group == "" && k.Kind == "Secret" }) {
				return errors.New("--relink-kinds names Secret: relinking Secrets is opt-in, add --relink-secrets and grant the ClusterRole of config/relink-secrets")
			}
		}
		if c.relinkSecrets {
			ro = secrets.Enable(ro)
		}
		opts.Setups = append(opts.Setups, relink.ManagerSetup(ro))
	} else if !opts.ObserveOnly && (c.relinkSecrets || c.relinkKinds != "") {
		return errors.New("--relink-kinds and --relink-secrets need the relinker: drop them or --relink=false")
	}

	logger := zap.New(zap.UseFlagOptions(&c.zap))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	opts.Logger = logger.WithName("initlock-manager")

	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return err
	}
	opts.Logger.Info("Starting the manager", "version", version.Get().Version, "namespace", opts.Namespace,
		"watchFilter", opts.WatchFilter, "orphanGrace", opts.OrphanGrace, "releaseAfterInit", opts.ReleaseAfterInit,
		"leaderElection", opts.LeaderElection, "metricsSecure", opts.MetricsSecure, "relink", c.relink && !opts.ObserveOnly, "relinkSecrets", c.relinkSecrets, "observeOnly", opts.ObserveOnly)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// loadConfig loads the kubeconfig as ctrl.GetConfig does (--kubeconfig,
// else the in-cluster config unless $KUBECONFIG is set, else $KUBECONFIG
// or ~/.kube/config), without its error logs, and with errors that say what
// to do.
func loadConfig() (*rest.Config, error) {
	path := ""
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		path = f.Value.String()
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--kubeconfig=%s: %w", path, err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig=%s: %w", path, err)
		}
		return cfg, nil
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("loading the in-cluster config: %w", err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a Pod with a ServiceAccount token")
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// oneLine joins the lines of a message (errors.Join puts each error on a
// line of its own), so that a failure is one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
