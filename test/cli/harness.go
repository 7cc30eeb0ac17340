package clisuite

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
)

// Update makes Golden rewrite the golden files, and the cases that check
// docs/reference.md rewrite it (go test ./internal/cli -update).
var Update = flag.Bool("update", false, "rewrite the golden files and the samples of docs/reference.md")

// invocation is how a command is run in process.
type invocation struct {
	// clock; the real one when nil.
	clock clock.PassiveClock
	// counter, when set, counts the command's requests.
	counter *kubeenv.Counter
	// before, when set, is called before each request leaves.
	before Before
	// stdin is what the user types; in, when set, is read instead.
	stdin string
	in    io.Reader
	// terminal makes every stream a terminal.
	terminal bool
	// progressThreshold; the default when 0.
	progressThreshold int
}

// Result is what a command printed and its exit code.
type Result struct {
	Out, Err string
	Code     int
}

// Execute runs kubectl-initlock with args, with opts for its streams and
// the rest of its options (Version "v0.0.0-test" when empty, no terminal
// when IsTerminal is nil).
func Execute(t *testing.T, opts cli.Options, args ...string) Result {
	t.Helper()
	var out, errOut bytes.Buffer
	if opts.IOStreams.In == nil {
		opts.IOStreams.In = strings.NewReader("")
	}
	opts.IOStreams.Out, opts.IOStreams.ErrOut = &out, &errOut
	if opts.Version == "" {
		opts.Version = "v0.0.0-test"
	}
	if opts.IsTerminal == nil {
		opts.IsTerminal = func(any) bool { return false }
	}
	code := cli.Execute(t.Context(), opts, args)
	return Result{Out: out.String(), Err: errOut.String(), Code: code}
}

// run runs a command against the backend as an admin.
func (b *Backend) run(t *testing.T, inv invocation, args ...string) Result {
	t.Helper()
	in := inv.in
	if in == nil {
		in = strings.NewReader(inv.stdin)
	}
	opts := cli.Options{
		IOStreams:         genericiooptions.IOStreams{In: in},
		Clock:             inv.clock,
		ProgressThreshold: inv.progressThreshold,
	}
	if inv.terminal {
		opts.IsTerminal = func(any) bool { return true }
	}
	args = append(args, b.connect(t, &opts, inv.counter, inv.before)...)
	return Execute(t, opts, args...)
}

// ExpectCode fails t unless the command exited with code, and returns r.
func (r Result) ExpectCode(t *testing.T, code int) Result {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, code, r.Out, r.Err)
	}
	return r
}

// OutHas reports each of want that stdout does not contain.
func (r Result) OutHas(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(r.Out, w) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", w, r.Out, r.Err)
		}
	}
}

// ErrHas reports each of want that stderr does not contain.
func (r Result) ErrHas(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(r.Err, w) {
			t.Errorf("stderr lacks %q:\n%s\nstdout:\n%s", w, r.Err, r.Out)
		}
	}
}

// expectN reports unless got, the number of what, is want.
func expectN(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

// listJSON runs list -o json in ns and decodes it.
func (b *Backend) listJSON(t *testing.T, ns string, extra ...string) cli.LockList {
	t.Helper()
	r := b.run(t, invocation{}, append([]string{"list", "-n", ns, "-o", "json"}, extra...)...).ExpectCode(t, 0)
	var l cli.LockList
	decodeJSON(t, r.Out, &l)
	return l
}

// decodeJSON decodes out, a command's output, into v, or fails t.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, out)
	}
}

func byCluster(l cli.LockList) map[string]cli.LockStatus {
	out := map[string]cli.LockStatus{}
	for _, s := range l.Items {
		out[s.Cluster] = s
	}
	return out
}

var (
	createdJSON = regexp.MustCompile(`"(created|clusterAbsentSince)": "[^"]+"`)
	createdYAML = regexp.MustCompile(`(?m)^(\s*(created|clusterAbsentSince)): .+$`)
)

// mask replaces what the API server sets (creation times) with
// placeholders.
func mask(s string) string {
	s = createdJSON.ReplaceAllString(s, `"$1": "<time>"`)
	return createdYAML.ReplaceAllString(s, `$1: <time>`)
}

// repoPath joins elem to the repository root.
func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// Golden compares got with internal/cli/testdata/name, or rewrites it with
// -update.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	path := repoPath(t, "internal", "cli", "testdata", name)
	if *Update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run with -update to accept it)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
