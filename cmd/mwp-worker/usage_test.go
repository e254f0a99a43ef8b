package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

// commandPaths lists every command of the tree, the root first, as the
// arguments that select it.
func commandPaths() [][]string {
	var paths [][]string
	var walk func(c *cli.Command, path []string)
	walk = func(c *cli.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands {
			walk(sub, append(append([]string(nil), path...), sub.Name))
		}
	}
	walk(newApp(), nil)
	return paths
}

// requiredFlags reports whether the command at path has required flags,
// and the fewest positional arguments it takes.
func requiredFlags(path []string) (has bool, args int) {
	c := newApp()
	for _, name := range path {
		c = c.Command(name)
	}
	for _, f := range c.Flags {
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			has = true
		}
	}
	args, _ = arity(c.ArgsUsage)
	return has, args
}

// checkUsageError: exit 2, nothing on stdout, exactly one stderr line
// naming the command, the problem and the command's --help.
func checkUsageError(t *testing.T, args []string, path []string, want string) {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	name := strings.Join(append([]string{"mwp-worker"}, path...), " ")
	if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.HasPrefix(errOut, name+": ") || !strings.HasSuffix(errOut, "; see "+name+" --help\n") ||
		!strings.Contains(errOut, want) {
		t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and one line %q: …%s…; see %s --help",
			args, code, out, errOut, exitUsage, name, want, name)
	}
}

// Every command, now and when one is added: a bad flag, a missing required
// flag and an argument it does not take are one line and exit 2.
func TestUsageErrorsEveryCommand(t *testing.T) {
	paths := commandPaths()
	if len(paths) < 18 {
		t.Fatalf("only %d commands found", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"mwp-worker"}, path...), " "), func(t *testing.T) {
			checkUsageError(t, append(append([]string(nil), path...), "--no-such-flag"), path, "flag provided but not defined: --no-such-flag;")
			if has, n := requiredFlags(path); has {
				args := append([]string(nil), path...)
				for range n {
					args = append(args, "arg")
				}
				checkUsageError(t, args, path, "not set")
			}
		})
	}
	// No positional arguments where ArgsUsage names none: those are
	// refused before the command runs (so `poc bogus` does not start a PoC).
	for _, tc := range []struct {
		path []string
		want string
	}{
		{nil, `unknown command "stray"`},
		{[]string{"authority"}, `unknown command "stray"`},
		{[]string{"scheduler"}, `unknown command "stray"`},
		{[]string{"inspect"}, `unknown command "stray"`},
		{[]string{"poc"}, `unknown command "stray"`},
		{[]string{"authority", "serve"}, `takes no arguments, got "stray"`},
		{[]string{"run"}, `takes no arguments, got "stray"`},
		{[]string{"keygen"}, `takes no arguments, got "stray"`},
		{[]string{"resync"}, `takes no arguments, got "stray"`},
		{[]string{"toolkey"}, `takes no arguments, got "stray"`},
		{[]string{"inspect", "events"}, `takes no arguments, got "stray"`},
		{[]string{"version"}, `takes no arguments, got "stray"`},
	} {
		checkUsageError(t, append(append([]string(nil), tc.path...), "stray"), tc.path, tc.want)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		path []string // the command named in the message
		want string
	}{
		{[]string{"run", "--data", "d", "--key", "k", "--slots", "x"}, []string{"run"}, `invalid value "x" for flag --slots: `},
		{[]string{"run", "--data", "d", "--key", "k", "--slots", `"1: -x"`}, []string{"run"}, `invalid value "\"1: -x\"" for flag --slots: `},
		{[]string{"run", "--bogus"}, []string{"run"}, "flag provided but not defined: --bogus;"},
		{[]string{"run", "-q"}, []string{"run"}, "flag provided but not defined: -q;"},
		{[]string{"validate", "--schema"}, []string{"validate"}, "flag needs an argument: --schema;"},
		{[]string{"run", "--data", "d", "--key", "k", "--demo-step", "soon"}, []string{"run"}, `invalid value "soon" for flag --demo-step: `},
		{[]string{"run", "--data", "d"}, []string{"run"}, `Required flag "key" not set`},
		{[]string{"authority", "serve", "--listen"}, []string{"authority", "serve"}, "flag needs an argument: --listen;"},
		{[]string{"validate"}, []string{"validate"}, "want FILE..., got 0 arguments"},
		{[]string{"canon"}, []string{"canon"}, "want FILE, got 0 arguments"},
		{[]string{"canon", "a.json", "b.json"}, []string{"canon"}, "want FILE, got 2 arguments"},
		{[]string{"digest", "a.json", "b.json"}, []string{"digest"}, "want FILE, got 2 arguments"},
		{[]string{"sign", "--key", "k"}, []string{"sign"}, "want DOC, got 0 arguments"},
		{[]string{"verify", "--pub", "p"}, []string{"verify"}, "want DOC..., got 0 arguments"},
		{[]string{"scheduler", "simulate", "a", "b"}, []string{"scheduler", "simulate"}, "want FILE, got 2 arguments"},
		{[]string{"poc", "approve", "--data", "d"}, []string{"poc", "approve"}, "want MISSION, got 0 arguments"},
		// poc's own flags are not options of poc approve.
		{[]string{"poc", "approve", "--data", "d", "--faults", "all", "mis-a"}, []string{"poc", "approve"}, "faults"},
		{[]string{"inspect"}, []string{"inspect"}, `Required flag "data" not set`},
		{[]string{"help", "bogus"}, []string{"help"}, `unknown command "bogus"`},
		{[]string{"help", "authority", "bogus"}, []string{"help"}, `unknown command "authority bogus"`},
		{[]string{"help", "a", "b", "c"}, []string{"help"}, "got 3 arguments"},
	} {
		checkUsageError(t, tc.args, tc.path, tc.want)
	}
}

// `help CMD` and `CMD --help` print the same, for every command.
func TestHelpCommand(t *testing.T) {
	for _, path := range commandPaths() {
		code, viaFlag, errOut := runCLI(t, append(append([]string(nil), path...), "--help")...)
		if code != 0 || errOut != "" || !strings.HasPrefix(viaFlag, "NAME:\n") {
			t.Fatalf("%q --help: exit %d, stderr %q", path, code, errOut)
		}
		code, viaCmd, errOut := runCLI(t, append([]string{"help"}, path...)...)
		if len(path) > 2 {
			continue // help takes at most two names
		}
		if code != 0 || errOut != "" || viaCmd != viaFlag {
			t.Errorf("help %q: exit %d, stderr %q, and it differs from --help:\n%s\n---\n%s", path, code, errOut, viaCmd, viaFlag)
		}
	}
}

// The help text defects of the past, checked on every flag of every
// command: a placeholder names a value, not another flag (backquotes in a
// Usage make the placeholder: "--enroll run --enrollment"), a default is
// given once, required flags say so.
func TestFlagHelpText(t *testing.T) {
	var walk func(c *cli.Command, path string)
	walk = func(c *cli.Command, path string) {
		for _, f := range c.Flags {
			s := cli.FlagStringer(f)
			pn, usage, ok := strings.Cut(s, "\t")
			head, _, _ := strings.Cut(pn, " [ --") // a slice flag shows itself twice
			if !ok || !strings.HasPrefix(head, "--"+f.Names()[0]) || strings.Count(head, "--") != 1 {
				t.Errorf("%s: flag shown as %q", path, pn)
			}
			if n := strings.Count(usage, "(default"); n > 1 {
				t.Errorf("%s %s: %d defaults in %q", path, pn, n, usage)
			}
			if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() && !strings.Contains(usage, "(required)") {
				t.Errorf("%s %s: required, but its usage %q does not say so", path, pn, usage)
			}
		}
		for _, sub := range c.Commands {
			walk(sub, path+" "+sub.Name)
		}
	}
	walk(newApp(), "mwp-worker")
}

func TestArity(t *testing.T) {
	for _, tc := range []struct {
		usage       string
		least, most int
	}{
		{"", 0, 0},
		{"FILE", 1, 1},
		{"FILE...", 1, -1},
		{"DOC...", 1, -1},
		{"[FILE]", 0, 1},
		{"[FILE...]", 0, -1},
		{"SRC DST", 2, 2},
		{"[COMMAND [SUBCOMMAND]]", 0, 2},
		{"MISSION [NOTE]", 1, 2},
	} {
		if least, most := arity(tc.usage); least != tc.least || most != tc.most {
			t.Errorf("arity(%q) = %d, %d; want %d, %d", tc.usage, least, most, tc.least, tc.most)
		}
	}
}

func TestVersionInProcess(t *testing.T) {
	code, viaFlag, errOut := runCLI(t, "--version")
	if code != 0 || errOut != "" || strings.Count(viaFlag, "\n") != 1 || !strings.HasPrefix(viaFlag, "mwp-worker version ") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, viaFlag, errOut)
	}
	if code, viaCmd, _ := runCLI(t, "version"); code != 0 || viaCmd != viaFlag {
		t.Fatalf("version: exit %d, %q; --version said %q", code, viaCmd, viaFlag)
	}
}

func TestVersionString(t *testing.T) {
	for _, tc := range []struct {
		v    versionInfo
		want string
	}{
		{versionInfo{Version: "(devel)", Go: "go1.26.8", Platform: "linux/amd64"}, "(devel) (revision unknown; go1.26.8 linux/amd64)"},
		{versionInfo{Version: "v0.1.0", Revision: "8ffda48", Time: "2026-12-01T23:00:00Z", Modified: true, Go: "go1.26.8", Platform: "linux/arm64"},
			"v0.1.0 (revision 8ffda48, 2026-12-01T23:00:00Z, modified; go1.26.8 linux/arm64)"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.v, got, tc.want)
		}
	}
}
