package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/initlock/initlock/internal/manager"
	"github.com/initlock/initlock/internal/relink"
)

// config is what the command line sets.
type config struct {
	opts        manager.Options
	zap         zap.Options
	version     bool
	relink      bool
	relinkKinds string
	// relinkSecrets adds Secrets to the relinked kinds.
	relinkSecrets bool
}

// group is a section of --help: a title and its flags.
type group struct {
	title string
	fs    *flag.FlagSet
}

// parseFlags parses args into a config. Every flag is registered in one of
// three groups, which --help prints apart: the manager's own flags, the zap
// logging flags and the two klog flags that still matter (client-go logs
// through the zap logger). It returns flag.ErrHelp after printing the help
// to stdout.
func parseFlags(args []string, stdout io.Writer) (*config, error) {
	c := &config{opts: manager.DefaultOptions()}
	own := flag.NewFlagSet("initlock-manager", flag.ContinueOnError)
	c.opts.BindFlags(own)
	// controller-runtime registers --kubeconfig on the default FlagSet and
	// reads it from there in ctrl.GetConfig.
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		own.Var(f.Value, f.Name, "Path to a kubeconfig; empty uses $KUBECONFIG, the in-cluster config, then ~/.kube/config.")
	}
	own.BoolVar(&c.version, "version", false, "Print the version and exit.")
	own.BoolVar(&c.relink, "relink", true, "Run the relinker: link objects restored with the "+relink.Annotation+
		" annotation (written by the Velero plugin) to their owners' current UIDs.")
	own.StringVar(&c.relinkKinds, "relink-kinds", "", "Comma-separated kinds the relinker relinks and watches as owners, "+
		"written Kind.group or Kind.version.group (Kind for the core group); empty is the Cluster API core kinds and ConfigMaps.")
	own.BoolVar(&c.relinkSecrets, "relink-secrets", false, "Also relink Secrets labelled with a Cluster name; needs the relink-secrets ClusterRole (config/relink-secrets).")

	logging := flag.NewFlagSet("zap", flag.ContinueOnError)
	c.zap.BindFlags(logging)
	klogAll := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogAll)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	for _, name := range []string{"v", "vmodule"} {
		f := klogAll.Lookup(name)
		klogFlags.Var(f.Value, f.Name, f.Usage)
	}
	groups := []group{
		{"Flags", own},
		{"Logging flags (controller-runtime's zap logger)", logging},
		{"client-go logging flags (klog, written through the zap logger)", klogFlags},
	}

	all := flag.NewFlagSet("initlock-manager", flag.ContinueOnError)
	all.SetOutput(io.Discard)
	for _, g := range groups {
		g.fs.VisitAll(func(f *flag.Flag) { all.Var(f.Value, f.Name, f.Usage) })
	}
	if err := all.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, groups)
		}
		return nil, err
	}
	if all.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: initlock-manager takes flags only", all.Args())
	}
	return c, nil
}

func printHelp(w io.Writer, groups []group) {
	_, _ = fmt.Fprintf(w, `Usage: %s [flags]

initlock-manager keeps the Cluster API control-plane init locks of a management
cluster owned, releases them once the control plane is initialised, collects
orphans, and relinks objects restored by Velero to their owners.
`, os.Args[0])
	for _, g := range groups {
		_, _ = fmt.Fprintf(w, "\n%s:\n", g.title)
		g.fs.SetOutput(w)
		g.fs.PrintDefaults()
	}
}
