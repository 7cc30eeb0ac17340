package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/initlock/initlock/internal/relink"
)

type relinksOptions struct {
	allNamespaces bool
	kinds         string
}

func (a *app) newRelinksCommand() *cobra.Command {
	o := &relinksOptions{}
	cmd := &cobra.Command{
		Use:   "relinks [-n NAMESPACE | -A] [--kinds KINDS]",
		Short: "List the restored objects the relinker has not linked, with each owner's verdict and why",
		Long: `Relinks lists the objects that carry the ` + relink.Annotation + `
annotation, which the Velero plugin writes on restored objects and the relinker
removes once it has linked them, one row per owner the annotation records. Each
owner is read live and judged by the relinker's link rule: linked, original (the
backed-up owner, never deleted), same-restore (restored with the object) link it;
not-found, deleting and unproven (an object holds the owner's name but nothing
proves it the backed-up one) leave it waiting, and REASON says why. An unproven
owner is never linked automatically: link the object by hand if it is its owner.`,
		Example: `  kubectl initlock relinks -A
  kubectl initlock relinks -n capi-clusters --kinds Machine.cluster.x-k8s.io,KubeadmConfig.bootstrap.cluster.x-k8s.io`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runRelinks(cmd, o) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the objects in all namespaces.")
	cmd.Flags().StringVar(&o.kinds, "kinds", "", "The relinked kinds, as initlock-manager's --relink-kinds (default: its default kinds and Secrets).")
	return cmd
}

func (a *app) runRelinks(cmd *cobra.Command, o *relinksOptions) error {
	kinds := append(relink.DefaultKinds(), schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
	if o.kinds != "" {
		var err error
		if kinds, err = relink.ParseKinds(o.kinds); err != nil {
			return fmt.Errorf("--kinds: %w", err)
		}
	}
	ns, err := a.namespace(o.allNamespaces)
	if err != nil {
		return err
	}
	conn, err := a.connect()
	if err != nil {
		return err
	}
	pending, skipped, err := relink.FindPending(cmd.Context(), conn.client, ns, kinds)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "Not listed: %s.\n", s)
	}
	if len(pending) == 0 {
		_, err := fmt.Fprintln(cmd.ErrOrStderr(), "No restored object waits for the relinker.")
		return err
	}
	return printRelinks(cmd.OutOrStdout(), pending, a.clock.Now())
}

// printRelinks prints one row per recorded owner of each pending object.
func printRelinks(w io.Writer, pending []relink.Pending, now time.Time) error {
	t := newTable(w, false)
	t.row("NAMESPACE", "OBJECT", "OWNER", "VERDICT", "AGE", "REASON")
	for _, p := range pending {
		object := strings.ToLower(p.GVK.GroupKind().String()) + "/" + p.Name
		age := duration.HumanDuration(now.Sub(p.Created.Time))
		if p.Err != nil {
			t.row(orNone(p.Namespace), object, "-", "invalid", age, p.Err.Error())
		}
		for _, j := range p.Owners {
			owner := strings.ToLower(j.Owner.GroupKind().String()) + "/" + j.Owner.Name
			t.row(orNone(p.Namespace), object, owner, string(j.Verdict), age, orDash(j.Why))
		}
	}
	return t.flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
