package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/initlock/initlock/internal/relink"
)

type relinksOptions struct {
	allNamespaces bool
	kinds         string
	output        string
}

func (a *app) newRelinksCommand() *cobra.Command {
	o := &relinksOptions{}
	cmd := &cobra.Command{
		Use:   "relinks [-n NAMESPACE | -A] [--kinds KINDS] [-o table|name|json|yaml]",
		Short: "List the restored objects the relinker has not linked, with each owner's verdict and why",
		Long: `Relinks lists the objects that carry the ` + relink.Annotation + `
annotation, which the Velero plugin writes on restored objects and the relinker
removes once it has linked them, one row per owner the annotation records. Each
owner is read live and judged by the relinker's link rule: linked, original (the
backed-up owner, never deleted), same-restore (restored with the object) link it;
not-found, deleting and unproven (an object holds the owner's name but nothing
proves it the backed-up one) leave it waiting, and REASON says why. An unproven
owner is never linked automatically: link the object by hand if it is its owner.

-o name prints TYPE/NAME of each object, once whatever the number of its owners
(configmap/<name>, machine.cluster.x-k8s.io/<name>). -o json and -o yaml print a
RelinkList (apiVersion ` + ListAPIVersion + `): each object with its owners, their
verdicts and reasons, and in notListed the kinds that were not listed and why.`,
		Example: `  kubectl initlock relinks -A
  kubectl initlock relinks -n capi-clusters --kinds Machine.cluster.x-k8s.io,KubeadmConfig.bootstrap.cluster.x-k8s.io
  kubectl initlock relinks -A -o json | jq '.items[].owners[] | select(.verdict == "unproven")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runRelinks(cmd, o) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the objects in all namespaces.")
	cmd.Flags().StringVar(&o.kinds, "kinds", "", "The relinked kinds, as initlock-manager's --relink-kinds (default: its default kinds and Secrets).")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: table (default), name, json or yaml.")
	return cmd
}

func (a *app) runRelinks(cmd *cobra.Command, o *relinksOptions) error {
	if err := validOutput(o.output, relinksOutputs); err != nil {
		return err
	}
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
		return fmt.Errorf("finding the objects waiting for the relinker: %w", err)
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case outputJSON:
		return printJSON(out, relinkList(pending, skipped))
	case outputYAML:
		return printYAML(out, relinkList(pending, skipped))
	}
	for _, s := range skipped {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "Not listed: %s.\n", s)
	}
	if len(pending) == 0 {
		_, err := fmt.Fprintln(cmd.ErrOrStderr(), "No restored object waits for the relinker.")
		return err
	}
	if o.output == outputName {
		names := make([]string, 0, len(pending))
		for _, p := range pending {
			names = append(names, objectName(p.GVK.GroupKind(), p.Name))
		}
		return printNames(out, names)
	}
	return printRelinks(out, pending, a.clock.Now())
}

// printRelinks prints one row per recorded owner of each pending object.
func printRelinks(w io.Writer, pending []relink.Pending, now time.Time) error {
	t := newTable(w, false)
	t.row("NAMESPACE", "OBJECT", "OWNER", "VERDICT", "AGE", "REASON")
	for _, p := range pending {
		object := objectName(p.GVK.GroupKind(), p.Name)
		age := duration.HumanDuration(now.Sub(p.Created.Time))
		if p.Err != nil {
			t.row(orNone(p.Namespace), object, "-", "invalid", age, p.Err.Error())
		}
		for _, j := range p.Owners {
			t.row(orNone(p.Namespace), object, objectName(j.Owner.GroupKind(), j.Owner.Name), string(j.Verdict), age, orDash(j.Why))
		}
	}
	return t.flush()
}

// relinkList is the RelinkList of the pending objects and of the kinds
// skipped.
func relinkList(pending []relink.Pending, skipped []string) RelinkList {
	list := RelinkList{APIVersion: ListAPIVersion, Kind: RelinkListKind, NotListed: skipped, Items: []RelinkStatus{}}
	for _, p := range pending {
		apiVersion, kind := p.GVK.ToAPIVersionAndKind()
		s := RelinkStatus{APIVersion: apiVersion, Kind: kind, Namespace: p.Namespace, Name: p.Name,
			Created: p.Created.UTC().Format(time.RFC3339), Owners: []RelinkOwnerStatus{}}
		if p.Err != nil {
			s.Problem = p.Err.Error()
		}
		for _, j := range p.Owners {
			s.Owners = append(s.Owners, RelinkOwnerStatus{APIVersion: j.Owner.APIVersion, Kind: j.Owner.Kind, Name: j.Owner.Name,
				UID: string(j.Owner.UID), LiveUID: string(j.UID), Verdict: string(j.Verdict), Reason: j.Why})
		}
		list.Items = append(list.Items, s)
	}
	return list
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
