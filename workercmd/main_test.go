package workercmd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// A program on Main is run, with up as a subcommand and --version: run's
// required flags do not hold up back, and each answer is one line.
func TestMainCommands(t *testing.T) {
	defer slog.SetDefault(slog.Default()) // Main makes its logger the default
	echo := slots.Exec{Path: "/bin/true", Cap: protocol.Capability{ID: "text.echo", Version: "1.0.0"}}
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"--version"}, 0, "prog version (devel) (revision", ""},
		{[]string{}, ExitUsage, "", "prog: required flag data, key not set; see prog --help\n"},
		{[]string{"up"}, 1, "", "up: exactly one PLAN file is required\n"},
		{[]string{"up", "../examples/plans/echo-hello.yaml"}, 1, "", "up: stage echo needs capability echo.run 1.x, and the handlers provide text.echo@1.0.0 (--handler-exec CAP=PATH)\n"},
		{[]string{"up", "--help"}, 0, "--input NAME=FILE", ""},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"prog"}, tc.args...), &out, &errb, echo)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || tc.errs != "" && errb.String() != tc.errs || tc.errs == "" && errb.Len() > 0 {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.errs)
		}
	}
}
