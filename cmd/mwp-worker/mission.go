package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/workercmd"
)

// The mission commands talk to a remote authority as a human (the
// Mission's owner or another member) over its HTTPS routes (package
// remote, docs/wire.md "HTTPS routes").

func missionCommand() *cli.Command {
	return &cli.Command{
		Name:  "mission",
		Usage: "start, follow and decide Missions on a remote authority, as their human owner",
		Commands: []*cli.Command{
			missionStartCommand(),
			missionStatusCommand(),
			missionDecisionCommand("approve", "approve a Mission awaiting approval (mission.approve)"),
			missionDecisionCommand("request-changes", "send a Mission awaiting approval back to work (mission.request_changes)"),
			missionDecisionCommand("cancel", "cancel a Mission (mission.cancel)"),
		},
	}
}

// authorityFlags reach the authority as a human; every mission command
// takes them.
func authorityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "authority", Usage: "authority URL wss://HOST:PORT/mwp (its HTTPS routes are under it)", Required: true, Sources: cli.EnvVars("MWP_AUTHORITY")},
		&cli.StringFlag{Name: "authority-fingerprint", Usage: "pin the authority's certificate: sha256:<64 hex>", Sources: cli.EnvVars("MWP_AUTHORITY_FINGERPRINT")},
		&cli.StringFlag{Name: "authority-ca", Usage: "PEM file of CA certificates to trust for the authority", Sources: cli.EnvVars("MWP_AUTHORITY_CA")},
		&cli.StringFlag{Name: "authority-key", Usage: "the authority's public key file (DIR/authority.pub), to verify events", Sources: cli.EnvVars("MWP_AUTHORITY_KEY")},
		&cli.StringFlag{Name: "owner-key", Usage: "the human's private key file (key id human:ID#NAME, from keygen)", Required: true, Sources: cli.EnvVars("MWP_OWNER_KEY")},
		&cli.BoolFlag{Name: "insecure-loopback", Usage: "allow ws:// to a loopback authority (tests only)", Sources: cli.EnvVars("MWP_INSECURE_LOOPBACK")},
	}
}

// refusal prints a command's failure as one line on stderr, with the
// protocol error code when the authority refused, and exits 1.
func refusal(cmd *cli.Command, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		fmt.Fprintf(cmd.Root().ErrWriter, "%s: %s: %s\n", cmd.FullName(), pe.Code, pe.Message)
	} else {
		fmt.Fprintf(cmd.Root().ErrWriter, "%s: %v\n", cmd.FullName(), err)
	}
	return exitError{1}
}

// dialHuman connects as the human of --owner-key; needEvents requires
// --authority-key, since events are read only once verified.
func dialHuman(ctx context.Context, cmd *cli.Command, needEvents bool) (*remote.Authority, protocol.PrivateKey, error) {
	key, who, err := principalKey(cmd, "owner-key", cmd.String("owner-key"), protocol.ActorHuman)
	if err != nil {
		return nil, key, err
	}
	cfg := remote.Config{URL: cmd.String("authority"), AllowInsecureLoopback: cmd.Bool("insecure-loopback"),
		Trust: remote.Trust{Pin: cmd.String("authority-fingerprint"), CAFile: cmd.String("authority-ca")},
		Actor: who, Key: key, Patience: outagePatience(), Waiting: outageNotice(cmd)}
	if p := cmd.String("authority-key"); p != "" {
		k, err := protocol.LoadPublicKey(p)
		if err != nil {
			return nil, key, usagef(cmd, "--authority-key: %v", err)
		}
		cfg.AuthorityKeys = protocol.NewKeySet(k)
	} else if needEvents {
		return nil, key, usagef(cmd, "--authority-key is required: events are read only once their signatures are verified")
	}
	a, err := remote.Dial(ctx, cfg)
	return a, key, err
}

// outagePatience is how long the mission commands and `coordinator run`
// wait out an authority they cannot reach (restarting, overloaded) before
// they fail: the worker's offline grace, with the back-off of its artifact
// transfers (remote.Patience).
func outagePatience() remote.Patience {
	return remote.Patience{Grace: offline.DefaultGrace}
}

// outageNotice says once on stderr that a command is waiting for the
// authority.
func outageNotice(cmd *cli.Command) func(tries int, wait time.Duration, err error) {
	return func(tries int, _ time.Duration, err error) {
		if tries == 1 {
			fmt.Fprintf(cmd.Root().ErrWriter, "%s: the authority is unreachable (%s); waiting up to %s\n", cmd.FullName(), oneLine(err.Error()), outagePatience().Grace)
		}
	}
}

// stableActionID derives a command's action id from the plan's bytes and
// the command, so that starting the same plan again sends the same ids: the
// authority then answers the stored receipt or ACTION_ID_COLLISION (the
// command was accepted before, with an older issuedAt).
func stableActionID(planDigest string, typ protocol.CommandType) string {
	sum := sha256.Sum256([]byte(planDigest + "\x00" + string(typ)))
	return "act-plan-" + hex.EncodeToString(sum[:12])
}

func missionStartCommand() *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "create a plan's Mission on the authority and assign its coordinator",
		ArgsUsage: "PLAN",
		Description: "Parses PLAN (plan.Parse: a bad plan prints its problems, FILE:LINE:COL: message, and exits 1)\n" +
			"and reads its inputs' files (--input NAME=FILE, or the plan's file members; an input nobody provides is\n" +
			"refused on one line, exit 1), then sends mission.create as the owner (--owner-key) and mission.assign_coordinator naming\n" +
			"--coordinator, an agent whose registered card declares the coordinator role. Prints\n" +
			"\"mission MISSION group GROUP\" on one line. The inputs are stored on the authority after mission.create;\n" +
			"give `coordinator run` the same --input values: it binds and publishes them for the stages. Repeating it with the same plan file is safe: the\n" +
			"action ids derive from the plan's bytes, so a Mission already started is reported, not doubled.",
		Flags: append(authorityFlags(),
			&cli.StringFlag{Name: "coordinator", Usage: "the coordinator agent's id", Required: true, Sources: cli.EnvVars("MWP_COORDINATOR")},
			&cli.DurationFlag{Name: "coordinator-lease", Usage: "the coordinator lease (leaseDurationMs)", Value: 24 * time.Hour, Sources: cli.EnvVars("MWP_COORDINATOR_LEASE")},
			workercmd.InputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name := cmd.Args().First()
			data, err := os.ReadFile(name)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			p, err := plan.Parse(name, data)
			if err != nil {
				var pe *plan.Error
				if errors.As(err, &pe) {
					for _, pr := range pe.Problems {
						fmt.Fprintf(cmd.Root().ErrWriter, "%s:%s\n", name, pr)
					}
					return exitError{1}
				}
				return refusal(cmd, err)
			}
			inputs, err := workercmd.PlanInputs(p, cmd.StringSlice("input"))
			if err != nil {
				fmt.Fprintf(cmd.Root().ErrWriter, "%s: %s\n", cmd.FullName(), oneLine(err.Error()))
				return exitError{1}
			}
			if cmd.Duration("coordinator-lease") < time.Millisecond {
				return usagef(cmd, "--coordinator-lease must be at least 1ms")
			}
			a, key, err := dialHuman(ctx, cmd, false)
			if err != nil {
				return failOrUsage(cmd, err)
			}
			digest := protocol.Digest(data)
			now := time.Now()
			create := p.CreateMission(now)
			if err := sendOnce(ctx, a, key, protocol.CmdMissionCreate, protocol.Envelope{GroupID: p.Mission.GroupID,
				ActionID: stableActionID(digest, protocol.CmdMissionCreate), CorrelationID: p.Mission.ID}, &create, now); err != nil {
				return refusal(cmd, err)
			}
			// The owner is a member now, and may store the inputs; the
			// coordinator (given the same inputs) publishes them.
			for _, in := range inputs {
				if _, _, err := a.PutArtifact(ctx, in.Data); err != nil {
					return refusal(cmd, fmt.Errorf("input %s: %w", protocol.Digest(in.Data), err))
				}
			}
			assign := protocol.AssignCoordinatorPayload{MissionID: p.Mission.ID, AgentID: cmd.String("coordinator"),
				LeaseDurationMs: uint64(cmd.Duration("coordinator-lease").Milliseconds())}
			// The creator is the Group's first member, at membership epoch 1.
			if err := sendOnce(ctx, a, key, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: p.Mission.GroupID,
				MembershipEpoch: protocol.Uint64(1), ActionID: stableActionID(digest, protocol.CmdMissionAssignCoordinator),
				CorrelationID: p.Mission.ID}, &assign, time.Now()); err != nil {
				return refusal(cmd, err)
			}
			fmt.Fprintf(cmd.Root().Writer, "mission %s group %s\n", p.Mission.ID, p.Mission.GroupID)
			return nil
		},
	}
}

// failOrUsage passes a usage error on and reports any other as a refusal.
func failOrUsage(cmd *cli.Command, err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	return refusal(cmd, err)
}

// sendOnce signs and submits one command; ACTION_ID_COLLISION on its
// stable action id means it was accepted before, which is success.
func sendOnce(ctx context.Context, a *remote.Authority, key protocol.PrivateKey, typ protocol.CommandType, env protocol.Envelope, payload any, now time.Time) error {
	_, raw, err := protocol.BuildCommand(a.Actor(), key, typ, env, payload, now)
	if err != nil {
		return err
	}
	_, err = a.Submit(ctx, raw)
	if protocol.CodeOf(err) == protocol.CodeActionIDCollision {
		return nil
	}
	return err
}
