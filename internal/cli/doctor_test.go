package cli_test

import (
	"testing"

	"github.com/initlock/initlock/internal/cli"
	clisuite "github.com/initlock/initlock/test/cli"
)

// doctor takes no argument and only the output formats it prints.
func TestDoctorArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "extra"}, "error: unknown command \"extra\" for \"kubectl initlock doctor\"\n"},
		{[]string{"doctor", "-o", "wide"}, "error: unknown output format \"wide\": use one of table, json, yaml\n"},
	} {
		if r := clisuite.Execute(t, cli.Options{}, tc.args...).ExpectCode(t, cli.ExitError); r.Err != tc.want || r.Out != "" {
			t.Errorf("%v: stderr %q, stdout %q; want stderr %q", tc.args, r.Err, r.Out, tc.want)
		}
	}
}
