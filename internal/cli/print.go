package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// Output formats of list and relinks.
const (
	outputTable = ""
	outputWide  = "wide"
	outputName  = "name"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// The output formats each command takes besides the table.
var (
	listOutputs    = []string{outputWide, outputName, outputJSON, outputYAML}
	relinksOutputs = []string{outputName, outputJSON, outputYAML}
)

// validOutput checks o is the table ("" or "table") or one of formats.
func validOutput(o string, formats []string) error {
	if o == outputTable || o == "table" || slices.Contains(formats, o) {
		return nil
	}
	return fmt.Errorf("unknown output format %q: use one of table, %s", o, strings.Join(formats, ", "))
}

// table writes aligned columns. With colour, every cell of the verdict
// column is wrapped in escape sequences of the same length, so that
// tabwriter, which counts bytes, still aligns the columns.
type table struct {
	tw     *tabwriter.Writer
	colour bool
}

func newTable(w io.Writer, colour bool) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), colour: colour}
}

func (t *table) row(cells ...string) {
	_, _ = fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// ANSI colours, all of the same length.
const (
	sgrReset   = "\x1b[0m"
	sgrDefault = "\x1b[39m"
	sgrRed     = "\x1b[31m"
	sgrGreen   = "\x1b[32m"
	sgrYellow  = "\x1b[33m"
)

func (t *table) verdict(v string) string {
	if !t.colour {
		return v
	}
	c := sgrDefault
	switch v {
	case "healthy", "free":
		c = sgrGreen
	case "corrupt", "foreign", "lost":
		c = sgrRed
	case "unowned", "held-after-init", "stale-holder", "orphan":
		c = sgrYellow
	}
	return c + v + sgrReset
}

// useColour tells whether to colour out: only on a terminal, and never when
// NO_COLOR is set or TERM is dumb.
func (a *app) useColour(out io.Writer) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	return a.opts.IsTerminal(out)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// tableOptions say how printTable prints.
type tableOptions struct {
	// wide adds the lock name, the paused flag, the action and the problem.
	wide bool
	// noHeaders leaves the header row out.
	noHeaders bool
	// colour colours the verdicts.
	colour bool
}

// printTable prints the list as a table.
func printTable(w io.Writer, items []LockStatus, o tableOptions, now time.Time) error {
	t := newTable(w, o.colour)
	wide := o.wide
	header := []string{"NAMESPACE", "CLUSTER", "HOLDER", "HOLDER-EXISTS", "OWNER", "PROTECTION", "INITIALIZED", "AGE", t.verdict("VERDICT")}
	if wide {
		header = append(header, "LOCK", "PAUSED", "ACTION", "PROBLEM")
	}
	if !o.noHeaders {
		t.row(header...)
	}
	for _, s := range items {
		holderExists, initialised, age, lock := "-", "-", "-", s.Lock
		if s.Holder != "" {
			holderExists = yesNo(s.HolderExists)
		}
		if s.ClusterExists {
			initialised = yesNo(s.ClusterInitialized)
		}
		if s.Created != "" {
			if created, err := time.Parse(time.RFC3339, s.Created); err == nil {
				age = duration.HumanDuration(now.Sub(created))
			}
		}
		if !s.LockExists {
			lock = "<none>"
		}
		protection := s.Protection
		if protection == "" {
			protection = "-"
		}
		cells := []string{s.Namespace, s.Cluster, orNone(s.Holder), holderExists, orNone(s.Owner), protection, initialised, age, t.verdict(s.Verdict)}
		if wide {
			paused := "-"
			if s.ClusterExists {
				paused = yesNo(s.ClusterPaused)
			}
			cells = append(cells, lock, paused, s.Action, orNone(s.Problem))
		}
		t.row(cells...)
	}
	return t.flush()
}

// lockNames are the TYPE/NAME of each row of list, as kubectl's -o name
// prints them: the lock ConfigMap, or the Cluster for a row without a lock.
func lockNames(items []LockStatus) []string {
	names := make([]string, 0, len(items))
	for _, s := range items {
		name := "configmap/" + s.Lock
		if !s.LockExists {
			name = "cluster." + capi.Group + "/" + s.Cluster
		}
		names = append(names, name)
	}
	return names
}

// objectName is TYPE/NAME of an object of kind gk, as kubectl's -o name
// prints it: the kind in lower case, then its group, if any.
func objectName(gk schema.GroupKind, name string) string {
	return strings.ToLower(gk.String()) + "/" + name
}

// printNames prints one TYPE/NAME a line (-o name).
func printNames(w io.Writer, names []string) error {
	for _, name := range names {
		if _, err := fmt.Fprintln(w, name); err != nil {
			return err
		}
	}
	return nil
}

// printJSON prints v, a LockList or a RelinkList, as indented JSON (-o json).
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("encoding the output as JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printYAML prints v, a LockList or a RelinkList, as YAML (-o yaml).
func printYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the output as YAML: %w", err)
	}
	_, err = w.Write(b)
	return err
}
