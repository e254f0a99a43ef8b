package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/plan"
	"github.com/missionweave/mwp-worker/protocol"
)

// execute turns one action into its command; it reports whether one was
// sent (a review still waiting for its reviewer's verdict sends none).
func (c *Coordinator) execute(ctx context.Context, a action, now time.Time) (bool, error) {
	m := c.cfg.Plan.Mission
	p, _ := effective(c.v, c.cfg.Plan, c.pol.rework)
	switch a.kind {
	case actRenew:
		return true, c.do(ctx, protocol.CmdMissionRenewCoordinator, a, now, &protocol.RenewCoordinatorPayload{MissionID: m.ID, LeaseDurationMs: uint64(c.cfg.LeaseDuration.Milliseconds())})
	case actMember:
		return true, c.do(ctx, protocol.CmdMembershipChange, a, now, &protocol.ChangeMembershipPayload{
			Principal: protocol.Actor{Kind: protocol.ActorAgent, ID: a.item}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	case actAuthorize:
		auth, err := p.Authorize(a.stage.ID, c.v.g.Mission.CreatedAt.Time)
		if err != nil {
			return false, err
		}
		return true, c.do(ctx, protocol.CmdWorkAuthorize, a, now, &auth)
	case actPublish:
		return true, c.publish(ctx, a, now)
	case actOffer:
		return true, c.do(ctx, protocol.CmdWorkOffer, a, now, offerPayload(c.v, p, c.v.g.Items[a.item], c.workers, now, c.pol))
	case actContext:
		pkg, err := c.contextPackage(c.v.g.Items[a.item], now)
		if err != nil {
			return false, err
		}
		return true, c.do(ctx, protocol.CmdContextPublish, a, now, &protocol.PublishContextPayload{Package: pkg})
	case actReview:
		return c.review(ctx, p, a, now)
	case actApproval:
		return true, c.do(ctx, protocol.CmdMissionSubmitForApproval, a, now, approvalPayload(c.v, p))
	case actTerminate:
		return true, c.do(ctx, protocol.CmdMissionTerminate, a, now, &protocol.TerminateMissionPayload{MissionID: m.ID, Reason: a.reason})
	}
	return false, fmt.Errorf("coordinator: unknown action %s", a.kind)
}

// maxRebuilds bounds the new action ids one action takes after
// ACTION_ID_COLLISION at one log position; past it the action waits, as
// any refused one does, for the log to move.
const maxRebuilds = 8

// do signs and sends one command, with the action id of a at this log
// position (actionID). A command refused with ACTION_ID_COLLISION (its id
// is taken by other content: another process of this agent decided the
// same action at the same position with other bytes) is built again at
// once under a new action id, as spec 19 asks; the id stays derived from
// the log, so a restarted coordinator walks the same ids and the authority
// answers each one it already holds with the same content from its record.
func (c *Coordinator) do(ctx context.Context, typ protocol.CommandType, a action, now time.Time, payload any) error {
	me := protocol.Actor{Kind: protocol.ActorAgent, ID: c.cfg.AgentID}
	for {
		env := protocol.Envelope{
			GroupID:         c.cfg.Plan.Mission.GroupID,
			ActionID:        actionID(c.cfg.AgentID, c.cfg.Plan.Mission.GroupID, c.cfg.Plan.Mission.ID, c.v.lastSeq, a),
			CorrelationID:   c.cfg.Plan.Mission.ID,
			SessionEpoch:    protocol.Uint64(c.cfg.Authority.SessionEpoch()),
			MembershipEpoch: protocol.Uint64(c.v.membershipEpoch(me)),
		}
		if protocol.CarriesCoordinatorEpoch(typ) {
			env.CoordinatorEpoch = protocol.Uint64(c.Epoch())
		}
		_, raw, err := protocol.BuildCommand(me, c.cfg.Key, typ, env, payload, now)
		if err != nil {
			return err
		}
		_, err = c.cfg.Authority.Submit(ctx, raw)
		if protocol.CodeOf(err) != protocol.CodeActionIDCollision || a.rebuild >= maxRebuilds {
			return err
		}
		a.rebuild++
		c.cfg.Logger.Warn("command refused for a used actionId; building it again", "type", typ, "item", a.item, "actionId", env.ActionID, "rebuild", a.rebuild)
	}
}

// actionID names action a decided by agent at log position seq of
// Group groupID, Mission missionID: "act-c-", the position, the action's kind and 32 hex
// digits of a hash of all of them with the Group, the Mission and what the
// action is about (item or agent, input digest). A coordinator restarted
// on the same log that decides the same builds the same id, so the
// authority answers a resend from its record instead of acting twice;
// the Group and Mission in the hash keep the ids of one agent's Missions
// apart, since the authority keys its records by (actor, actionId) across
// Groups. At most 79 characters, whatever the lengths of the ids hashed.
func actionID(agent, groupID, missionID string, seq uint64, a action) string {
	pos := strconv.FormatUint(seq, 10)
	parts := []any{"mwp-coordinator", agent, groupID, missionID, pos, string(a.kind), a.item, a.digest}
	if a.rebuild > 0 {
		parts = append(parts, strconv.Itoa(a.rebuild)) // absent at 0: the ids of earlier releases stay the same
	}
	b, err := protocol.Canonical(parts)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return "act-c-" + pos + "-" + string(a.kind) + "-" + strings.TrimPrefix(protocol.Digest(b), "sha256:")[:32]
}

// publish stores a coordinator-made input and publishes it under the
// WorkItem that reads it, with a manifest the coordinator signs as its
// producer (spec 13.1).
func (c *Coordinator) publish(ctx context.Context, a action, now time.Time) error {
	in, _ := c.pol.input(c.v, a.digest)
	digest, uri, err := c.cfg.Authority.PutArtifact(ctx, in.Data)
	if err != nil {
		return err
	}
	card, err := c.cfg.Authority.AgentCard(ctx, c.cfg.AgentID)
	if err != nil {
		return err
	}
	rawCard, err := protocol.Marshal(card)
	if err != nil {
		return err
	}
	cardHash := protocol.Digest(rawCard)
	m := protocol.ArtifactManifest{ContentHash: digest, MediaType: in.MediaType, Schema: protocol.ManifestSchema("", in.MediaType),
		Producer:  protocol.ArtifactProducer{AgentID: c.cfg.AgentID, AgentVersion: card.AgentVersion, AgentCardHash: cardHash},
		MissionID: c.cfg.Plan.Mission.ID, GroupID: c.cfg.Plan.Mission.GroupID, WorkItemID: a.item,
		SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{},
		CreatedAt: protocol.NewTime(now), Classification: protocol.ClassInternal, Size: uint64(len(in.Data)), URI: uri}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: c.cfg.Key.KeyID, CreatedAt: m.CreatedAt}
	raw, err := protocol.SignedValue(m, c.cfg.Key)
	if err != nil {
		return err
	}
	var signed protocol.ArtifactManifest
	if err := json.Unmarshal(raw, &signed); err != nil {
		return err
	}
	return c.do(ctx, protocol.CmdArtifactPublish, a, now, &protocol.PublishArtifactPayload{Manifest: signed})
}

// Renew sends mission.renew_coordinator now on the coordinator epoch this
// coordinator held; call it only while Run is not running. A coordinator
// replaced by a newer assignment gets AUTH_STALE_COORDINATOR: its late
// commands are fenced.
func (c *Coordinator) Renew(ctx context.Context) error {
	return c.do(ctx, protocol.CmdMissionRenewCoordinator, action{kind: actRenew, item: "late"}, c.cfg.Clock.Now(),
		&protocol.RenewCoordinatorPayload{MissionID: c.cfg.Plan.Mission.ID, LeaseDurationMs: uint64(c.cfg.LeaseDuration.Milliseconds())})
}

// review runs the 13.2 review of a submission and accepts or fails it.
func (c *Coordinator) review(ctx context.Context, p *plan.Plan, a action, now time.Time) (bool, error) {
	rec, err := review(ctx, c.v, p, a.stage, reviewIO{fetch: c.cfg.Authority.Artifact, runCheck: c.cfg.RunCheck,
		rules: c.cfg.Rules, provenance: c.cfg.RequireProvenance})
	if err != nil {
		return false, err // transient: reviewed again after a back-off
	}
	c.countReview(a.stage, rec)
	if c.cfg.OnReview != nil {
		c.cfg.OnReview(rec)
	}
	c.cfg.Logger.Info("review", "item", a.item, "submission", rec.Submission, "accepted", rec.Accepted, "waiting", rec.Waiting, "checks", rec.CheckList(), "steps", rec.Steps)
	sub, w := c.v.item(a.item).submission, c.v.g.Items[a.item]
	if rec.Waiting {
		c.pol.prechecked[a.item] = sub.seq
		return false, nil
	}
	if rec.Accepted {
		return true, c.do(ctx, protocol.CmdWorkAcceptResult, a, now, &protocol.AcceptResultPayload{WorkItemID: a.item, ContractRevision: w.Contract.Revision,
			ReviewEvidence: acceptEvidence(rec, w.Contract, c.cfg.AgentID, now, sub.artifacts), Comment: "accepted after the spec 13.2 review"})
	}
	ev, reason := failEvidence(rec, c.cfg.AgentID, now, sub.artifacts)
	return true, c.do(ctx, protocol.CmdWorkFail, a, now, &protocol.FailWorkPayload{WorkItemID: a.item, Reason: reason, Evidence: ev})
}

// approvalPayload gathers, for the approvers, every stage's accepted
// artifacts and review evidence (spec 13.2: all results are kept for the
// final human approval).
func approvalPayload(v *view, p *plan.Plan) *protocol.SubmitForApprovalPayload {
	out := &protocol.SubmitForApprovalPayload{MissionID: p.Mission.ID, Artifacts: protocol.List[string]{}, Evidence: protocol.List[protocol.Evidence]{}}
	var verified []string
	for _, s := range p.Stages {
		if l := v.items[s.WorkItemID]; l != nil && l.accepted != nil {
			verified = append(verified, s.ID)
			out.Artifacts = append(out.Artifacts, l.accepted.artifacts...)
			out.Evidence = append(out.Evidence, l.evidence...)
		}
	}
	out.Summary = fmt.Sprintf("%s: %d stage(s) verified (%s); approvers: %s", p.Mission.Title, len(verified),
		strings.Join(verified, ", "), strings.Join(p.Approval.Approvers, ", "))
	if p.Approval.Instructions != "" {
		out.Summary += ". " + p.Approval.Instructions
	}
	return out
}

func newTimer(clk clock.Clock, d time.Duration) clock.Timer {
	if t, ok := clk.(clock.Timers); ok {
		return t.NewTimer(d)
	}
	return clock.Real{}.NewTimer(d)
}
