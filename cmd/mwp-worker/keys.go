package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/urfave/cli/v3"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:  "keygen",
		Usage: "write a new Ed25519 key pair: DIR/NAME.key (mode 0600) and DIR/NAME.pub",
		Description: "The private file is {\"alg\":\"Ed25519\",\"keyId\":...,\"privateKey\":<base64url seed>}; the public\n" +
			"file is the PublicKey object of an Agent Card, {\"alg\",\"keyId\",\"publicKey\"}. Agents name keys\n" +
			"<kind>:<id>#<name>, e.g. --key-id agent:worker-1#k1; the authority accepts a Command only when\n" +
			"its key belongs to the Command's actor. An existing NAME.key is never overwritten.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "`DIR` for the key files (created 0700 if missing)", Required: true, Sources: cli.EnvVars("MWP_KEY_DIR")},
			&cli.StringFlag{Name: "name", Usage: "`NAME` of the files, without extension", Value: "mwp"},
			&cli.StringFlag{Name: "key-id", Usage: "`KEYID` written into signatures, e.g. agent:worker-1#k1 (default: key-<20 random hex digits>)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.NArg() != 0 {
				return fmt.Errorf("keygen takes no arguments")
			}
			keyID := cmd.String("key-id")
			if keyID == "" {
				var b [10]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				keyID = "key-" + hex.EncodeToString(b[:])
			}
			k, err := protocol.GenerateKey(keyID, nil)
			if err != nil {
				return err
			}
			privPath, pubPath, err := protocol.WriteKeyFiles(cmd.String("out"), cmd.String("name"), k)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.Root().Writer, "key id:      %s\nprivate key: %s\npublic key:  %s\n", k.KeyID, privPath, pubPath)
			return err
		},
	}
}

func signCommand() *cli.Command {
	return &cli.Command{
		Name:      "sign",
		Usage:     "sign a Command, Event or signed document and write it to stdout as canonical JSON",
		ArgsUsage: "DOC",
		Description: "DOC (or - for stdin) is decoded under the strict I-JSON rules; any signature it has is replaced.\n" +
			"signature.createdAt is the document's issuedAt, else occurredAt, else createdAt, or --created-at\n" +
			"(which must then agree with the document's own time). The signing input is the RFC 8785 bytes of\n" +
			"the document without signature.value. Output is the signed document's RFC 8785 bytes and a newline.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "private key `FILE` (from keygen; must not be group or world readable)", Required: true, Sources: cli.EnvVars("MWP_KEY")},
			&cli.StringFlag{Name: "created-at", Usage: "signature `TIME`, RFC 3339 UTC (2026-11-30T08:00:00Z)"},
			maxBytesFlag(), maxDepthFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name, err := oneFileArg(cmd)
			if err != nil {
				return err
			}
			errOut := cmd.Root().ErrWriter
			keyPath := cmd.String("key")
			k, err := protocol.LoadPrivateKey(keyPath)
			if err != nil {
				fmt.Fprintln(errOut, problemLine(keyPath, err))
				return exitError{1}
			}
			doc, err := readObject(name, decodeOptions(cmd))
			if err != nil {
				fmt.Fprintln(errOut, problemLine(name, err))
				return exitError{1}
			}
			if s := cmd.String("created-at"); s != "" {
				at, perr := protocol.ParseTime(s)
				if perr != nil {
					return fmt.Errorf("--created-at: %v", perr)
				}
				err = protocol.Sign(doc, k, at.Time)
			} else {
				err = protocol.SignDocument(doc, k)
			}
			if err != nil {
				fmt.Fprintln(errOut, problemLine(name, err))
				return exitError{1}
			}
			out, err := protocol.Canonical(doc)
			if err != nil {
				fmt.Fprintln(errOut, problemLine(name, err))
				return exitError{1}
			}
			_, err = cmd.Root().Writer.Write(append(out, '\n'))
			return err
		},
	}
}

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check the Ed25519 signatures of Commands, Events and signed documents",
		ArgsUsage: "DOC...",
		Description: "Each DOC (or - for stdin) is decoded under the strict I-JSON rules and its signature checked\n" +
			"against the public key its keyId names among the --pub files. Prints DOC: ok, or\n" +
			"DOC: CODE: JSON-pointer: message, per file and exits 1 if any fails.\n" +
			"Freshness (issuedAt within --max-skew of --now) is checked only when --now or --max-skew is\n" +
			"given: a signed document at rest has no \"now\". Without --now, the current time is used;\n" +
			"documents without issuedAt (Events) fail a freshness check.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "pub", Usage: "public key `FILE` (repeatable)", Required: true, Sources: cli.EnvVars("MWP_PUB")},
			&cli.StringFlag{Name: "now", Usage: "check freshness against this `TIME`, RFC 3339 UTC"},
			&cli.DurationFlag{Name: "max-skew", Usage: "check freshness allowing this clock skew either way", Value: protocol.DefaultMaxSkew, Sources: cli.EnvVars("MWP_MAX_SKEW")},
			maxBytesFlag(), maxDepthFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.NArg() == 0 {
				return fmt.Errorf("verify needs at least one DOC")
			}
			keys, err := loadKeySet(cmd.StringSlice("pub"))
			if err != nil {
				return err
			}
			fresh := cmd.IsSet("now") || cmd.IsSet("max-skew")
			now := time.Now()
			if cmd.IsSet("now") {
				t, err := protocol.ParseTime(cmd.String("now"))
				if err != nil {
					return fmt.Errorf("--now: %v", err)
				}
				now = t.Time
			}
			skew := cmd.Duration("max-skew")
			opts := decodeOptions(cmd)
			out := cmd.Root().Writer
			failed := false
			for _, name := range cmd.Args().Slice() {
				doc, err := readObject(name, opts)
				if err == nil {
					if fresh {
						err = protocol.VerifyFresh(doc, keys, now, skew)
					} else {
						err = protocol.Verify(doc, keys)
					}
				}
				if err != nil {
					failed = true
					fmt.Fprintln(out, problemLine(name, err))
					continue
				}
				fmt.Fprintf(out, "%s: ok\n", name)
			}
			if failed {
				return exitError{1}
			}
			return nil
		},
	}
}

// readObject reads and strictly decodes a JSON object.
func readObject(name string, opts protocol.DecodeOptions) (map[string]any, error) {
	data, err := readInput(name, os.Stdin)
	if err != nil {
		return nil, err
	}
	v, err := protocol.Parse(data, opts)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "a signed document is a JSON object")
	}
	return doc, nil
}

// loadKeySet reads public key files; two different keys under one keyId
// would make verification depend on flag order, so that is an error.
func loadKeySet(paths []string) (protocol.KeySet, error) {
	keys := protocol.KeySet{}
	for _, p := range paths {
		k, err := protocol.LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		if old, ok := keys[k.KeyID]; ok && !old.Equal(k.Key) {
			return nil, fmt.Errorf("%s: key id %q is already used by a different key", p, k.KeyID)
		}
		keys[k.KeyID] = k.Key
	}
	return keys, nil
}

// principalKey loads the private key file path, given as --flag, and the
// principal it is a key of, which must be of kind (else a usage error).
func principalKey(cmd *cli.Command, flag, path string, kind protocol.ActorKind) (protocol.PrivateKey, protocol.Actor, error) {
	key, err := protocol.LoadPrivateKey(path)
	if err != nil {
		return key, protocol.Actor{}, usagef(cmd, "--%s: %v", flag, err)
	}
	who, ok := protocol.KeyOwner(key.KeyID)
	if !ok || who.Kind != kind {
		article := "a"
		if kind == protocol.ActorAgent {
			article = "an"
		}
		return key, who, usagef(cmd, "--%s: key %s is not %s %s's (want %s:ID#NAME)", flag, key.KeyID, article, kind, kind)
	}
	return key, who, nil
}
