// Command addon installs, upgrades and deletes the clusterctl add-on
// provider initlock with the clusterctl client library of the Cluster API
// release pinned in this module, built with that release's own
// dependencies: it does what "clusterctl init --addon initlock",
// "clusterctl upgrade apply --addon <namespace>/initlock:<version>" and
// "clusterctl delete --addon initlock" do, without the command line.
//
// The clusterctl configuration is the file -config names, read as
// "clusterctl --config" reads it (its providers, cert-manager settings and
// variables; the environment as well, as clusterctl does). Both -config and
// -kubeconfig must be given: no default kubeconfig is read.
//
// On success it prints one JSON line on stdout,
// {"command":"<command>","seconds":<time spent in the library call>}, and
// exits 0. Logs go to stderr; on failure it exits 1 with the error on
// stderr.
//
// Usage:
//
//	go run ./addon -config clusterctl.yaml -kubeconfig mgmt.kubeconfig init initlock:v0.1.0
//	go run ./addon -config clusterctl.yaml -kubeconfig mgmt.kubeconfig upgrade initlock-system/initlock:v0.1.1
//	go run ./addon -config clusterctl.yaml -kubeconfig mgmt.kubeconfig delete initlock
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	logf "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
	ctrl "sigs.k8s.io/controller-runtime"
)

// result is what addon prints on success.
type result struct {
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
}

func main() {
	var (
		configPath, kubeconfig string
		includeNamespace       bool
		verbosity              int
		timeout                time.Duration
	)
	// A flag set of its own: controller-runtime registers -kubeconfig on
	// the default one.
	fs := flag.NewFlagSet("addon", flag.ExitOnError)
	fs.StringVar(&configPath, "config", "", "The clusterctl configuration file (required), as clusterctl --config.")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the management cluster (required).")
	fs.BoolVar(&includeNamespace, "include-namespace", false, "delete: delete the provider's namespace too, as clusterctl delete --include-namespace.")
	fs.IntVar(&verbosity, "v", 0, "Log verbosity of the clusterctl library.")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "Give up after this long.")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: addon -config FILE -kubeconfig FILE [flags] init|upgrade|delete PROVIDER")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])

	log := logf.NewLogger(logf.WithThreshold(&verbosity))
	logf.SetLogger(log)
	ctrl.SetLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res, err := run(ctx, configPath, kubeconfig, includeNamespace, fs.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "addon: %v\n", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "addon: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath, kubeconfig string, includeNamespace bool, args []string) (result, error) {
	// An empty path would make the library read the user's clusterctl.yaml
	// or the default kubeconfig.
	var missing []error
	for _, f := range []struct{ name, value string }{{"config", configPath}, {"kubeconfig", kubeconfig}} {
		if f.value == "" {
			missing = append(missing, fmt.Errorf("-%s is required", f.name))
		}
	}
	if len(args) != 2 {
		missing = append(missing, fmt.Errorf("want a command and a provider, got %q", args))
	}
	if err := errors.Join(missing...); err != nil {
		return result{}, err
	}
	command, provider := args[0], args[1]

	c, err := client.New(ctx, configPath)
	if err != nil {
		return result{}, fmt.Errorf("building the clusterctl client from %s: %w", configPath, err)
	}
	kc := client.Kubeconfig{Path: kubeconfig}
	start := time.Now()
	switch command {
	case "init":
		_, err = c.Init(ctx, client.InitOptions{Kubeconfig: kc, AddonProviders: []string{provider}})
	case "upgrade":
		err = c.ApplyUpgrade(ctx, client.ApplyUpgradeOptions{Kubeconfig: kc, AddonProviders: []string{provider}})
	case "delete":
		err = c.Delete(ctx, client.DeleteOptions{Kubeconfig: kc, AddonProviders: []string{provider}, IncludeNamespace: includeNamespace})
	default:
		return result{}, fmt.Errorf("unknown command %q: want init, upgrade or delete", command)
	}
	elapsed := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%s %s: %w", command, provider, err)
	}
	return result{Command: command, Seconds: elapsed.Seconds()}, nil
}
