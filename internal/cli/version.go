package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/initlock/initlock/internal/version"
)

// DefaultVersion is the version of the running binary (see package
// internal/version): the version a release build sets at link time, else
// the module version or VCS revision Go recorded, else "dev".
func DefaultVersion() string { return version.Get().Version }

func (a *app) newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl-initlock",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if a.opts.Version != "" {
				info.Version = a.opts.Version
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-initlock %s\n", info)
			return err
		},
	}
}
