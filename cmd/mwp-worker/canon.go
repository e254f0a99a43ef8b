package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/urfave/cli/v3"
)

// readInput reads a named file, or stdin for "-".
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// problemLine renders an error the way validate, canon and digest print it:
// FILE: CODE: JSON-pointer: message.
func problemLine(file string, err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %s: %s: %s", file, pe.Code, pe.Pointer, pe.Message)
	}
	return fmt.Sprintf("%s: %v", file, err)
}

func maxBytesFlag() cli.Flag {
	return &cli.IntFlag{
		Name:    "max-bytes",
		Usage:   "largest document accepted",
		Value:   protocol.DefaultMaxBytes,
		Sources: cli.EnvVars("MWP_MAX_BYTES"),
	}
}

func maxDepthFlag() cli.Flag {
	return &cli.IntFlag{
		Name:    "max-depth",
		Usage:   "deepest nesting of arrays and objects accepted",
		Value:   protocol.DefaultMaxDepth,
		Sources: cli.EnvVars("MWP_MAX_DEPTH"),
	}
}

func decodeOptions(cmd *cli.Command) protocol.DecodeOptions {
	return protocol.DecodeOptions{MaxBytes: int(cmd.Int("max-bytes")), MaxDepth: int(cmd.Int("max-depth"))}
}

func oneFileArg(cmd *cli.Command) (string, error) {
	if cmd.NArg() != 1 {
		return "", fmt.Errorf("%s takes exactly one FILE (or - for stdin)", cmd.Name)
	}
	return cmd.Args().First(), nil
}

func canonCommand() *cli.Command {
	return &cli.Command{
		Name:      "canon",
		Usage:     "write the RFC 8785 (JCS) canonical bytes of a JSON document to stdout",
		ArgsUsage: "FILE",
		Description: "The document is first checked under the strict I-JSON rules (duplicate members, unsafe\n" +
			"integers, binary64 overflow/underflow, invalid UTF-8, lone surrogates, noncharacters, BOM).\n" +
			"Output has no trailing newline. Exit 1 on any problem, printed as FILE: CODE: pointer: message.",
		Flags: []cli.Flag{maxBytesFlag(), maxDepthFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name, err := oneFileArg(cmd)
			if err != nil {
				return err
			}
			data, err := readInput(name, os.Stdin)
			if err != nil {
				fmt.Fprintln(cmd.Root().ErrWriter, problemLine(name, err))
				return exitError{1}
			}
			out, err := protocol.CanonicalBytes(data, decodeOptions(cmd))
			if err != nil {
				fmt.Fprintln(cmd.Root().ErrWriter, problemLine(name, err))
				return exitError{1}
			}
			_, err = cmd.Root().Writer.Write(out)
			return err
		},
	}
}

func digestCommand() *cli.Command {
	return &cli.Command{
		Name:      "digest",
		Usage:     "print sha256:<hex> of a JSON document's canonical bytes (or of the raw file with --raw)",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "raw", Usage: "hash the file's exact bytes instead of its canonical form"},
			maxBytesFlag(), maxDepthFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name, err := oneFileArg(cmd)
			if err != nil {
				return err
			}
			data, err := readInput(name, os.Stdin)
			if err != nil {
				fmt.Fprintln(cmd.Root().ErrWriter, problemLine(name, err))
				return exitError{1}
			}
			if !cmd.Bool("raw") {
				if data, err = protocol.CanonicalBytes(data, decodeOptions(cmd)); err != nil {
					fmt.Fprintln(cmd.Root().ErrWriter, problemLine(name, err))
					return exitError{1}
				}
			}
			_, err = fmt.Fprintln(cmd.Root().Writer, protocol.Digest(data))
			return err
		},
	}
}
