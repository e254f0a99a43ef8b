package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v3"
)

// usageError is a command line a command cannot run. run prints it as one
// line, "mwp-worker CMD: the error; see mwp-worker CMD --help", and exits
// with exitUsage; nothing goes to stdout.
type usageError struct {
	command string // the full command name, "mwp-worker authority serve"
	err     error
}

func (e usageError) Error() string { return e.command + ": " + e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(cmd *cli.Command, format string, args ...any) error {
	return usageError{command: cmd.FullName(), err: fmt.Errorf(format, args...)}
}

// setUsageErrors gives cmd and every command below it the same handling
// of usage errors (the library's default prints the whole help, then the
// error, which run would print again), and a usage line for commands that
// run both on their own and with a subcommand (the library's template for
// commands with subcommands omits their own options).
func setUsageErrors(cmd *cli.Command, fullName string) {
	cmd.OnUsageError = func(_ context.Context, c *cli.Command, err error, _ bool) error {
		return usageError{command: c.FullName(), err: typedFlagNames(err)}
	}
	if cmd.Action != nil && len(cmd.Commands) > 0 && cmd.UsageText == "" {
		cmd.UsageText = fullName + " [options]\n" + fullName + " COMMAND [options]"
	}
	for _, sub := range cmd.Commands {
		setUsageErrors(sub, fullName+" "+sub.Name)
	}
}

// libraryFlagError matches the library's parse errors, which write every
// flag with one dash ("flag provided but not defined: -bogus" for --bogus).
var libraryFlagError = regexp.MustCompile(`^(flag provided but not defined: |flag needs an argument: |invalid value "(?:[^"\\]|\\.)*" for flag )-{0,2}([A-Za-z0-9][A-Za-z0-9_-]*)`)

// typedFlagNames writes the flag in such an error as it is typed: --name,
// or -n for a one-letter alias.
func typedFlagNames(err error) error {
	m := libraryFlagError.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	s := err.Error()
	name := s[m[4]:m[5]]
	dashes := "--"
	if len(name) == 1 {
		dashes = "-"
	}
	return errors.New(s[:m[3]] + dashes + name + s[m[5]:])
}

// checkArgs is every command's ArgValidator (set on the root, inherited).
// A command's ArgsUsage is the contract for its positional arguments:
// NAME is one required argument, [NAME] an optional one, NAME... (or
// [NAME...]) any number more; no ArgsUsage means none. A command with
// subcommands and no ArgsUsage takes only a subcommand's name.
func checkArgs(_ context.Context, cmd *cli.Command) error {
	n := cmd.NArg()
	if cmd.ArgsUsage == "" {
		switch {
		case n == 0:
			return nil
		case len(cmd.Commands) > 0:
			return usagef(cmd, "unknown command %q", cmd.Args().First())
		default:
			return usagef(cmd, "takes no arguments, got %q", cmd.Args().First())
		}
	}
	lo, hi := arity(cmd.ArgsUsage)
	if n < lo || (hi >= 0 && n > hi) {
		return usagef(cmd, "want %s, got %s", cmd.ArgsUsage, plural(n, "argument"))
	}
	return nil
}

// arity reads the least and the most positional arguments an ArgsUsage
// allows; most is -1 when there is no limit.
func arity(argsUsage string) (least, most int) {
	depth := 0
	for _, word := range strings.Fields(argsUsage) {
		if depth == 0 && !strings.HasPrefix(word, "[") {
			least++
		}
		depth += strings.Count(word, "[") - strings.Count(word, "]")
		if most >= 0 {
			most++
		}
		if strings.Contains(word, "...") {
			most = -1
		}
	}
	return least, most
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// helpCommand replaces the library's help command (hidden by
// HideHelpCommand), whose unknown topics end with "No help topic" and exit
// status 3 instead of a usage error.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of the program or of a command (the same as --help)",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var parent *cli.Command
			target := cmd.Root()
			for i, name := range cmd.Args().Slice() {
				next := target.Command(name)
				if next == nil || next.Hidden {
					return usagef(cmd, "unknown command %q", strings.Join(cmd.Args().Slice()[:i+1], " "))
				}
				parent, target = target, next
			}
			if parent == nil {
				return cli.ShowRootCommandHelp(target)
			}
			return cli.ShowCommandHelp(ctx, parent, target.Name)
		},
	}
}

// The library's help does not say which flags are required; ours does,
// before the environment variables the flag reads.
func init() {
	plain := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string {
		s := plain(f)
		if r, ok := f.(cli.RequiredFlag); !ok || !r.IsRequired() {
			return s
		}
		if i := strings.LastIndex(s, " [$"); i >= 0 {
			return s[:i] + " (required)" + s[i:]
		}
		return s + " (required)"
	}
}
