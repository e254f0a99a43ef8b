package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

// authoritySignProfileCommand signs an extension profile for the
// Organization (spec 18): the approval `authority serve --profile` checks.
func authoritySignProfileCommand() *cli.Command {
	return &cli.Command{
		Name:      "sign-profile",
		Usage:     "sign an extension profile as the Organization's approval",
		ArgsUsage: "PROFILE-FILE SCHEMA-FILE",
		Description: "Reads an extension profile (extension-profile.schema.json without its signature; schemaHash may be\n" +
			"left empty) and the JSON Schema of its data, sets schemaHash to the digest of the schema's canonical\n" +
			"bytes, signs the profile at its approvedAt with --policy-key and prints it (JCS). Give the result and the\n" +
			"schema to `authority serve --profile PROFILE=SCHEMA`.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy-key", Usage: "the policy service's private key `FILE` (keygen --key-id service:ID#k1)", Required: true, Sources: cli.EnvVars("MWP_POLICY_KEY")},
		},
		Action: signProfile,
	}
}

func signProfile(_ context.Context, cmd *cli.Command) error {
	fail := func(format string, args ...any) error {
		fmt.Fprintf(cmd.Root().ErrWriter, "authority sign-profile: "+format+"\n", args...)
		return exitError{1}
	}
	key, err := protocol.LoadPrivateKey(cmd.String("policy-key"))
	if err != nil {
		return fail("--policy-key: %v", err)
	}
	raw, err := os.ReadFile(cmd.Args().Get(0))
	if err != nil {
		return fail("%v", err)
	}
	schema, err := os.ReadFile(cmd.Args().Get(1))
	if err != nil {
		return fail("%v", err)
	}
	var p protocol.ExtensionProfile
	if err := protocol.DecodeExact(raw, &p, protocol.CodeSchemaValidationFailed); err != nil {
		return fail("%s: %v", cmd.Args().Get(0), oneLine(err.Error()))
	}
	if p.SchemaHash, err = protocol.SchemaHash(schema); err != nil {
		return fail("%s: %v", cmd.Args().Get(1), oneLine(err.Error()))
	}
	signed, err := protocol.SignedProfile(p, key)
	if err != nil {
		return fail("%v", oneLine(err.Error()))
	}
	var doc map[string]any
	_ = json.Unmarshal(signed, &doc)
	if _, _, err := protocol.CheckProfile(doc, schema); err != nil {
		return fail("%v", oneLine(err.Error()))
	}
	fmt.Fprintln(cmd.Root().Writer, string(signed))
	return nil
}

// registerProfiles reads serve's --profile PROFILE=SCHEMA pairs.
func registerProfiles(svc *authoritylite.Service, specs []string) error {
	for _, spec := range specs {
		pf, sf, ok := strings.Cut(spec, "=")
		if !ok || pf == "" || sf == "" {
			return fmt.Errorf("--profile %q: want PROFILE-FILE=SCHEMA-FILE", spec)
		}
		doc, err := os.ReadFile(pf)
		if err != nil {
			return fmt.Errorf("--profile: %v", err)
		}
		schema, err := os.ReadFile(sf)
		if err != nil {
			return fmt.Errorf("--profile: %v", err)
		}
		if err := svc.RegisterProfile(doc, schema); err != nil {
			return fmt.Errorf("--profile %s: %v", pf, oneLine(err.Error()))
		}
	}
	return nil
}
