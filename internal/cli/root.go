package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Exit codes of every command.
const (
	// ExitOK: the command did what was asked; for repair, every lock is
	// healthy or was repaired (or waits for a grace period to pass).
	ExitOK = 0
	// ExitError: the command failed or refused.
	ExitError = 1
	// ExitNeedsHuman: repair finished, but some locks need a person: a
	// corrupt lock or a ConfigMap that takes a cluster's lock name.
	ExitNeedsHuman = 2
)

// Options configure the root command. Only IOStreams is required.
type Options struct {
	// IOStreams are where commands read and write.
	IOStreams genericiooptions.IOStreams
	// Clock gives "now" for ages and decisions; the real clock when nil.
	Clock clock.PassiveClock
	// Version is the version the version command prints; DefaultVersion()
	// when empty.
	Version string
	// WrapConfig, when set, wraps the rest.Config built from the flags
	// (to count or inject requests).
	WrapConfig func(*rest.Config) *rest.Config
	// IsTerminal tells whether a stream is an interactive terminal; by
	// default an *os.File on a terminal is one.
	IsTerminal func(stream any) bool
	// ProgressThreshold is the number of writes from which repair shows a
	// progress bar on a terminal; 20 when 0.
	ProgressThreshold int
	// Client, when set, is the client every command reads and writes
	// with, in place of one built from the kubeconfig flags, and
	// CAPIVersion the Cluster API version it serves (not discovered): the
	// tests run the commands against a model of the API server with them.
	Client      client.Client
	CAPIVersion string
}

// ExitCodeError is an error that carries the exit code of the command. When
// Err is nil nothing is printed.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ExitCodeError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		return ec.Code
	}
	return ExitError
}

// Execute runs the plugin with args (without the program name), prints an
// error to the error stream and returns the exit code.
func Execute(ctx context.Context, opts Options, args []string) int {
	cmd := NewRootCommand(opts)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		var ec *ExitCodeError
		if !errors.As(err, &ec) || ec.Err != nil {
			_, _ = fmt.Fprintln(opts.IOStreams.ErrOut, errorMessage(err))
		}
	}
	return ExitCode(err)
}

// app is what every command shares.
type app struct {
	opts  Options
	flags *genericclioptions.ConfigFlags
	clock clock.PassiveClock
}

// NewRootCommand returns the kubectl-initlock command with its
// subcommands.
func NewRootCommand(opts Options) *cobra.Command {
	if opts.IOStreams.In == nil {
		opts.IOStreams.In = os.Stdin
	}
	if opts.IOStreams.Out == nil {
		opts.IOStreams.Out = io.Discard
	}
	if opts.IOStreams.ErrOut == nil {
		opts.IOStreams.ErrOut = io.Discard
	}
	if opts.IsTerminal == nil {
		opts.IsTerminal = isTerminal
	}
	if opts.ProgressThreshold == 0 {
		opts.ProgressThreshold = 20
	}
	a := &app{opts: opts, flags: genericclioptions.NewConfigFlags(true), clock: opts.Clock}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	a.flags.WrapConfigFn = opts.WrapConfig
	cmd := &cobra.Command{
		Use:   "kubectl-initlock",
		Short: "See and repair the Cluster API control-plane init locks of a management cluster",
		Long: `kubectl initlock shows every Cluster API control-plane init lock (the ConfigMap
<cluster>-lock) of a management cluster with a verdict, and repairs the broken
ones with the same decision function as the initlock manager.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl initlock",
		},
	}
	cmd.SetIn(opts.IOStreams.In)
	cmd.SetOut(opts.IOStreams.Out)
	cmd.SetErr(opts.IOStreams.ErrOut)
	a.flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(a.newListCommand(), a.newRepairCommand(), a.newReleaseCommand(), a.newRelinksCommand(), a.newDoctorCommand(), a.newVersionCommand())
	return cmd
}

func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// scheme holds the built-in types; Cluster API objects are read as
// unstructured or metadata-only objects.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	return s
}()

// connection is a client for the chosen kubeconfig context.
type connection struct {
	client client.Client
	// capiVersion is the Cluster API version the server prefers.
	capiVersion string
}

func (a *app) connect() (*connection, error) {
	if a.opts.Client != nil {
		return &connection{client: a.opts.Client, capiVersion: a.opts.CAPIVersion}, nil
	}
	host, dc, c, err := a.dial()
	if err != nil {
		return nil, err
	}
	version, err := capi.Discover(dc)
	if err != nil {
		return nil, fmt.Errorf("API server %s: %w", host, err)
	}
	return &connection{client: c, capiVersion: version}, nil
}

// dial makes a discovery client and a client for the chosen kubeconfig
// context, and returns the API server's address with them.
func (a *app) dial() (string, *discovery.DiscoveryClient, client.Client, error) {
	if err := a.checkKubeconfig(); err != nil {
		return "", nil, nil, err
	}
	cfg, err := a.flags.ToRESTConfig()
	if err != nil {
		return "", nil, nil, kubeconfigError(err)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", nil, nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", nil, nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return cfg.Host, dc, c, nil
}

// namespace returns the namespace from -n or the kubeconfig context, or ""
// for all namespaces.
func (a *app) namespace(all bool) (string, error) {
	if all {
		return "", nil
	}
	ns, _, err := a.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", kubeconfigError(err)
	}
	return ns, nil
}
