package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/initlock/initlock/internal/cli"
	clisuite "github.com/initlock/initlock/test/cli"
)

// doctor's help is its golden file's, as every other command's
// (TestHelpGolden): -update writes it.
func TestDoctorHelpGolden(t *testing.T) {
	t.Setenv("HOME", "/home/user")
	t.Setenv("KUBECACHEDIR", "")
	r := clisuite.Execute(t, cli.Options{}, "doctor", "--help")
	r.ExpectCode(t, cli.ExitOK)
	clisuite.Golden(t, filepath.Join("help", "help-doctor.golden"), r.Out)
}

// doctor takes no argument and only the output formats it prints.
func TestDoctorArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "extra"}, "error: unknown command \"extra\" for \"kubectl initlock doctor\"\n"},
		{[]string{"doctor", "-o", "wide"}, "error: unknown output format \"wide\": use one of table, json, yaml\n"},
	} {
		r := clisuite.Execute(t, cli.Options{}, tc.args...)
		r.ExpectCode(t, cli.ExitError)
		if r.Err != tc.want || r.Out != "" {
			t.Errorf("%v: stderr %q, stdout %q; want stderr %q", tc.args, r.Err, r.Out, tc.want)
		}
	}
}
