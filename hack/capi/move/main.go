// Command move moves the Cluster API objects of one namespace from one
// management cluster to another with the clusterctl client library of the
// Cluster API release pinned in this module, built with that release's own
// dependencies: it is what "clusterctl move" does, without the command line.
//
// The clusterctl configuration is held in memory: no clusterctl.yaml,
// override folder or default kubeconfig is read, and nothing is written to
// the user's home. Both kubeconfigs and the namespace must be given.
//
// On success it prints one JSON line on stdout,
// {"namespace":"<ns>","seconds":<time spent in Move>}, and exits 0. Logs go
// to stderr; on failure it exits 1 with the error on stderr.
//
// Usage:
//
//	go run ./move -from source.kubeconfig -to target.kubeconfig -namespace ns [-v 5]
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
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	logf "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
	ctrl "sigs.k8s.io/controller-runtime"
)

// result is what move prints on success.
type result struct {
	Namespace string  `json:"namespace"`
	Seconds   float64 `json:"seconds"`
}

func main() {
	var (
		from, to, namespace string
		verbosity           int
		timeout             time.Duration
	)
	flag.StringVar(&from, "from", "", "Kubeconfig of the source management cluster (required).")
	flag.StringVar(&to, "to", "", "Kubeconfig of the target management cluster (required).")
	flag.StringVar(&namespace, "namespace", "", "Namespace whose Cluster API objects are moved (required).")
	flag.IntVar(&verbosity, "v", 0, "Log verbosity of the clusterctl library.")
	flag.DurationVar(&timeout, "timeout", 5*time.Minute, "Give up after this long.")
	flag.Parse()

	log := logf.NewLogger(logf.WithThreshold(&verbosity))
	logf.SetLogger(log)
	ctrl.SetLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res, err := run(ctx, from, to, namespace)
	if err != nil {
		fmt.Fprintf(os.Stderr, "move: %v\n", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "move: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, from, to, namespace string) (result, error) {
	// An empty kubeconfig path or namespace would make the library fall back
	// to the default kubeconfig and its current namespace.
	var missing []error
	for _, f := range []struct{ name, value string }{{"from", from}, {"to", to}, {"namespace", namespace}} {
		if f.value == "" {
			missing = append(missing, fmt.Errorf("-%s is required", f.name))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return result{}, err
	}

	c, err := newClient(ctx)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	err = c.Move(ctx, client.MoveOptions{
		FromKubeconfig: client.Kubeconfig{Path: from},
		ToKubeconfig:   client.Kubeconfig{Path: to},
		Namespace:      namespace,
	})
	elapsed := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("moving namespace %q: %w", namespace, err)
	}
	return result{Namespace: namespace, Seconds: elapsed.Seconds()}, nil
}

// newClient returns a clusterctl client whose configuration lives in memory:
// no providers, image overrides or variables beyond the defaults, which is
// all that move needs.
func newClient(ctx context.Context) (client.Client, error) {
	reader := config.NewMemoryReader()
	// New does not initialise an injected reader; Init sets the empty
	// provider and image lists the configuration client reads.
	if err := reader.Init(ctx, ""); err != nil {
		return nil, fmt.Errorf("initialising the in-memory clusterctl configuration: %w", err)
	}
	cfg, err := config.New(ctx, "", config.InjectReader(reader))
	if err != nil {
		return nil, fmt.Errorf("building the clusterctl configuration: %w", err)
	}
	c, err := client.New(ctx, "", client.InjectConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the clusterctl client: %w", err)
	}
	return c, nil
}
