package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/internal/ops"
	"github.com/missionweave/mwp-worker/protocol"
)

// opEnroll is the authority socket's op for `authority enroll`.
const opEnroll = "enroll"

// enrollRequest is the body of opEnroll: the policy service's signed
// registration, and the agent's enrollment document when the card came
// from one.
type enrollRequest struct {
	Registration json.RawMessage `json:"registration"`
	Enrollment   json.RawMessage `json:"enrollment,omitempty"`
}

// enrollAnswer is the socket's answer: the registration, or the refusal
// as its error line (CODE: [POINTER: ]message).
type enrollAnswer struct {
	authoritylite.Enrolled
	Error string `json:"error,omitempty"`
}

func authorityEnrollCommand() *cli.Command {
	return &cli.Command{
		Name:      "enroll",
		Usage:     "register an agent's Agent Card with the running authority, for the Organization",
		ArgsUsage: "CARD-OR-ENROLLMENT-FILE",
		Description: "Registers the signed Agent Card in FILE (a card, or the enrollment `mwp-worker run --enrollment`\n" +
			"writes) with the `authority serve` running on DIR, over DIR/" + authoritySocket + ", without a restart. The\n" +
			"registration is an agent_card_register signed now with --policy-key, the key of a policy service the\n" +
			"authority knows (`serve --policy ID=PUBKEYFILE`); it is checked like every signed command (key,\n" +
			"signature, freshness), the card by its own keys, and an enrollment must still be valid\n" +
			"(`run --enrollment-valid`). It works with --closed-registration too. Prints the agent id and the\n" +
			"card hash; on a refusal one line `authority enroll: CODE: message` and exit 1 (docs/shapes.md).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the authority's data directory", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY_DATA")},
			&cli.StringFlag{Name: "policy-key", Usage: "the policy service's private key `FILE` (keygen --key-id service:ID#k1)", Required: true, Sources: cli.EnvVars("MWP_POLICY_KEY")},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the authority", Value: 10 * time.Second},
		},
		Action: enrollAgent,
	}
}

func enrollAgent(ctx context.Context, cmd *cli.Command) error {
	stderr := cmd.Root().ErrWriter
	fail := func(format string, args ...any) error {
		fmt.Fprintf(stderr, "authority enroll: "+format+"\n", args...)
		return exitError{1}
	}
	key, err := protocol.LoadPrivateKey(cmd.String("policy-key"))
	if err != nil {
		return fail("--policy-key: %v", err)
	}
	id, ok := strings.CutPrefix(key.KeyID, "service:")
	id, _, found := strings.Cut(id, "#")
	if !ok || !found || !protocol.KeyBelongsTo(key.KeyID, protocol.ActorService, id) {
		return fail("--policy-key: key id %q is not a service key (service:<id>#<name>)", key.KeyID)
	}
	path := cmd.Args().First()
	raw, err := readInput(path, os.Stdin)
	if err != nil {
		return fail("%v", err)
	}
	card, enrollment, err := cardOf(bytes.TrimSpace(raw))
	if err != nil {
		return fail("%s: %v", path, err)
	}
	_, reg, err := protocol.BuildCommand(protocol.Actor{Kind: protocol.ActorService, ID: id}, key,
		protocol.CmdAgentCardRegister, protocol.Envelope{}, &protocol.RegisterAgentCardPayload{AgentCard: card}, time.Now())
	if err != nil {
		return fail("%v", err)
	}
	body, err := json.Marshal(enrollRequest{Registration: reg, Enrollment: enrollment})
	if err != nil {
		return fail("%v", err)
	}
	sock := filepath.Join(cmd.String("data"), authoritySocket)
	var ans enrollAnswer
	if err := ops.Ask(sock, cmd.Duration("timeout"), ops.Request{Op: opEnroll, Body: body}, &ans); err != nil {
		return fail("no running authority answers on %s: %v", sock, err)
	}
	if ans.Error != "" {
		return fail("%s", ans.Error)
	}
	fmt.Fprintf(cmd.Root().Writer, "enrolled agent %s card %s\n", ans.AgentID, ans.AgentCardHash)
	return nil
}

// cardOf reads a signed Agent Card, or the enrollment document (an
// agent_card_register) that carries one; enrollment is then its bytes.
func cardOf(raw []byte) (card protocol.AgentCard, enrollment []byte, err error) {
	v, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return card, nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return card, nil, fmt.Errorf("want a JSON object: an Agent Card or an enrollment")
	}
	src := raw
	if doc["type"] == string(protocol.CmdAgentCardRegister) {
		p, _ := doc["payload"].(map[string]any)
		if src, err = protocol.Canonical(p["agentCard"]); err != nil {
			return card, nil, err
		}
		enrollment = raw
	} else if _, ok := doc["agentId"]; !ok {
		return card, nil, fmt.Errorf("neither an Agent Card (agentId, keys, signature) nor an enrollment (%s)", protocol.CmdAgentCardRegister)
	}
	if err := protocol.DecodeExact(src, &card, protocol.CodeSchemaValidationFailed); err != nil {
		return card, nil, err
	}
	return card, enrollment, nil
}

// enrollOps is what the authority's socket answers beyond its status.
func enrollOps(svc *authoritylite.Service) ops.Handlers {
	return ops.Handlers{opEnroll: func(ctx context.Context, body json.RawMessage) any {
		var req enrollRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Registration == nil {
			return enrollAnswer{Error: protocol.Errorf(protocol.CodeProtocolViolation, "an enroll request carries registration").Error()}
		}
		e, err := svc.Enroll(ctx, req.Registration, req.Enrollment)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				pe = protocol.Errorf(protocol.CodeInternalError, "%v", err)
			}
			return enrollAnswer{Error: pe.Error()}
		}
		return enrollAnswer{Enrolled: e}
	}}
}
