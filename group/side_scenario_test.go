package group

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// The rules the authority decides beside the Mission and WorkItem state
// machines, in the scenario files: memberships and delegations
// (members.txt), messages (messages.txt), cooperation-override grants
// (grants.txt), artifact publication (artifacts.txt) and budgets
// (budgets.txt). Directives, added to those of scenario_test.go:
//
//	card agent= roles=a,b [hash=] [version=]   register an Agent Card (default hash card-NAME, version 1.0)
//	members                                    one line per membership
//	change-membership principal= roles=        membership.change (by= defaults to alice)
//	end-membership principal=                  membership.end (by= defaults to the principal)
//	delegate delegate= id= commands= [items=] [expires-in=1h] [parent=]
//	                                           membership.grant_delegation by the coordinator
//	delegated command= [id=] by=               whether the sender acts under a delegation
//	post id= [conversation=] | correct id= | retract id= | redact id=   message.* (by= required)
//	messages                                   one line per message
//	grant id= policy= grantee= command= action= [expires-in=1h] [granted=0]
//	                                           policy.grant_cooperation_override (by= defaults to alice)
//	cite grant= command= action= refused-by=POLICY|none
//	                                           a command citing the grant, refused or not by a policy
//	publish id= hash= by= [sources=a,b] [epoch=] [lease=] [card-hash=] [version=] [outside-lease]
//	                                           artifact.publish of content hash for WorkItem id
//	usage id= tokens=N by= [epoch=] [lease=]   a usage record charging N tokens (the contract allows 1000)
//
// The side state starts as the authority's does: the MissionOwner joins
// with the Mission and the coordinator with its assignment (Members.Ensure,
// folded before every directive here), and the cards of coord, w1 and w2
// declare coordinator and worker. A refusal prints as in scenario_test.go
// and must leave the side state as it was.

type side struct {
	members   Members
	messages  Messages
	grants    Grants
	artifacts Artifacts
	usage     map[string]protocol.Usage
	cards     map[string]Card
}

func newSide() *side {
	c := Card{Roles: []protocol.Role{protocol.RoleCoordinator, protocol.RoleWorker}, AgentVersion: "1.0"}
	cards := map[string]Card{}
	for _, n := range []string{"coord", "w1", "w2"} {
		c.Hash = "card-" + n
		cards[n] = c
	}
	return &side{members: Members{}, messages: Messages{}, grants: Grants{}, artifacts: Artifacts{}, usage: map[string]protocol.Usage{}, cards: cards}
}

func (sd *side) Card(id string) (Card, bool)  { c, ok := sd.cards[id]; return c, ok }
func (sd *side) PolicyService(id string) bool { return id == orgPolicy.ID }

func init() {
	for name, c := range map[string]scenarioCommand{
		"card":              {"agent roles hash version", (*scenario).card},
		"members":           {"", (*scenario).membersLines},
		"change-membership": {"principal roles", (*scenario).changeMembership},
		"end-membership":    {"principal", (*scenario).endMembership},
		"delegate":          {"delegate id commands items expires-in parent", (*scenario).delegate},
		"delegated":         {"command id", (*scenario).delegated},
		"post":              {"id conversation", (*scenario).message},
		"correct":           {"id", (*scenario).message},
		"retract":           {"id", (*scenario).message},
		"redact":            {"id", (*scenario).message},
		"messages":          {"", (*scenario).messageLines},
		"grant":             {"id policy grantee command action expires-in granted", (*scenario).grant},
		"cite":              {"grant command action refused-by", (*scenario).cite},
		"publish":           {"id hash sources epoch lease card-hash version outside-lease", (*scenario).publish},
		"usage":             {"id tokens epoch lease", (*scenario).usageRecord},
	} {
		scenarioCommands[name] = c
	}
}

// sync folds the memberships the authority gives with the Mission and the
// coordinator's assignment.
func (s *scenario) sync() {
	m := s.k.g.Mission
	if m == nil {
		return
	}
	s.side.members.FoldAll(s.side.members.Ensure(s.k.g.GroupID, m.Owner, protocol.RoleMissionOwner, m.Owner, s.k.now))
	if c := m.Coordinator; c != nil {
		s.side.members.FoldAll(s.side.members.Ensure(s.k.g.GroupID, agent(c.AgentID), protocol.RoleCoordinator, m.Owner, s.k.now))
	}
}

func (s *scenario) sideState() string {
	b, err := json.Marshal(s.side)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

func (sd *side) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{sd.members, sd.messages, sd.grants, sd.artifacts, sd.usage})
}

// decideSide runs one side decision and renders it; an accepted one is
// folded by fold.
func (s *scenario) decideSide(decide func() ([]EventDraft, error), fold func([]EventDraft)) string {
	s.sync()
	before := s.sideState()
	ds, err := decide()
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			s.td.Fatalf(s.t, "error %T is not a *protocol.Error: %v", err, err)
		}
		if after := s.sideState(); after != before {
			s.td.Fatalf(s.t, "refusal %v changed state", err)
		}
		out := "error: " + string(pe.Code)
		if pe.Pointer != "" {
			out += " " + pe.Pointer
		}
		if p, ok := pe.Details["policy"].(string); ok {
			out += " policy=" + p
		}
		if d, ok := pe.Details["dimension"].(string); ok {
			out += fmt.Sprintf(" dimension=%s scope=%s", d, pe.Details["scope"])
		}
		return out + "\n"
	}
	fold(ds)
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(s.sideEvent(d) + "\n")
	}
	return b.String()
}

func one(d EventDraft, err error) ([]EventDraft, error) {
	if err != nil {
		return nil, err
	}
	return []EventDraft{d}, nil
}

func (s *scenario) sideEvent(d EventDraft) string {
	f := fields{fmt.Sprintf("%s %s/%s rev=%d", d.Type, d.Aggregate.Kind, d.Aggregate.ID, d.Revision)}
	switch p := d.Payload.(type) {
	case *protocol.Membership:
		f = append(f, memberFields(p)...)
	case *MessageEvent:
		f.add("state", p.State)
		f.add("author", p.Author.ID)
		f.opt("conversation", p.ConversationID)
	case *protocol.CooperationOverrideGrant:
		f.add("policy", p.Policy)
		f.add("grantee", p.Grantee.ID)
		f.add("for", string(p.TargetCommandType)+"/"+p.TargetActionID)
		f.add("expires", fmtT(p.ExpiresAt))
	case *OverrideConsumed:
		f.add("policy", p.Policy)
		f.add("by", p.TargetCommandType+"/"+p.ConsumedByActionID)
	case *ArtifactPublished:
		f.add("work-item", p.Manifest.WorkItemID)
		f.add("producer", p.Manifest.Producer.AgentID)
	case *UsageRecorded:
		f.add("tokens", p.UsageDelta.Tokens)
		f.add("total", p.UsedTotal.Tokens)
	}
	return strings.Join(f, " ")
}

func memberFields(m *protocol.Membership) fields {
	var f fields
	var roles []string
	for _, r := range m.Roles {
		roles = append(roles, string(r))
	}
	f.add("principal", m.Principal.ID)
	f.opt("roles", strings.Join(roles, ","))
	f.add("state", m.State)
	f.add("epoch", m.MembershipEpoch)
	var ds []string
	for _, d := range m.Delegations {
		ds = append(ds, d.DelegationID+">"+d.Delegate.ID)
	}
	f.opt("delegations", strings.Join(ds, ","))
	return f
}

// Directives.

func (s *scenario) card() string {
	name := s.need("agent")
	var roles []protocol.Role
	for _, r := range s.list("roles") {
		roles = append(roles, protocol.Role(r))
	}
	s.side.cards[name] = Card{Roles: roles, Hash: s.str("hash", "card-"+name), AgentVersion: s.str("version", "1.0")}
	return fmt.Sprintf("card %s roles=%s", name, s.str("roles", "none"))
}

func (s *scenario) membersLines() string {
	s.sync()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.side.members)) {
		m := s.side.members[k]
		fmt.Fprintf(&b, "%s rev=%d\n", strings.Join(memberFields(m), " "), m.Revision)
	}
	return b.String()
}

func (s *scenario) changeMembership() string {
	var roles protocol.List[protocol.Role]
	for _, r := range s.list("roles") {
		roles = append(roles, protocol.Role(r))
	}
	in := s.send(Input{Type: protocol.CmdMembershipChange, GroupID: s.k.g.GroupID, ActionID: "act-member",
		Payload: &protocol.ChangeMembershipPayload{Principal: actorNamed(s.need("principal")), Roles: roles}}, owner.ID, true)
	return s.decideSide(func() ([]EventDraft, error) { return one(s.side.members.DecideMembership(s.k.g, in, s.side, s.k.now)) }, s.side.members.FoldAll)
}

func (s *scenario) endMembership() string {
	p := s.need("principal")
	in := s.send(Input{Type: protocol.CmdMembershipEnd, GroupID: s.k.g.GroupID, ActionID: "act-end",
		Payload: &protocol.EndMembershipPayload{Principal: actorNamed(p)}}, p, true)
	return s.decideSide(func() ([]EventDraft, error) { return one(s.side.members.DecideMembership(s.k.g, in, s.side, s.k.now)) }, s.side.members.FoldAll)
}

func (s *scenario) delegate() string {
	pl := &protocol.GrantDelegationPayload{DelegationID: s.need("id"), Delegate: actorNamed(s.need("delegate")),
		CommandTypes: s.list("commands"), WorkItemIDs: s.list("items"), ParentDelegationID: s.str("parent", ""),
		ExpiresAt: protocol.NewTime(s.k.now.Add(s.duration("expires-in", "1h")))}
	in := s.byCoordinator(Input{Type: protocol.CmdMembershipGrantDelegation, GroupID: s.k.g.GroupID, ActionID: "act-delegate", Payload: pl})
	return s.decideSide(func() ([]EventDraft, error) { return one(s.side.members.DecideMembership(s.k.g, in, s.side, s.k.now)) }, s.side.members.FoldAll)
}

func (s *scenario) delegated() string {
	s.sync()
	typ := protocol.CommandType(s.need("command"))
	var payload any
	if id := s.str("id", ""); id != "" {
		payload = &protocol.CancelWorkPayload{WorkItemID: id}
	}
	in := s.byWorker(Input{Type: typ, Payload: payload})
	return fmt.Sprintf("delegated=%t", s.side.members.Delegated(s.k.g, in, s.k.now))
}

func (s *scenario) message() string {
	id := s.need("id")
	var pl any
	switch s.td.Cmd {
	case "post":
		pl = &protocol.PostMessagePayload{MessageID: id, ConversationID: s.str("conversation", "conv-1"), Text: "hello", MediaType: "text/plain"}
	case "correct":
		pl = &protocol.CorrectMessagePayload{MessageID: id, Text: "hello again", Reason: "typo"}
	case "retract":
		pl = &protocol.RetractMessagePayload{MessageID: id, Reason: "wrong thread"}
	case "redact":
		pl = &protocol.RedactMessagePayload{MessageID: id, Reason: "secret"}
	}
	in := s.byWorker(Input{Type: protocol.CommandType("message." + s.td.Cmd), GroupID: s.k.g.GroupID, Payload: pl})
	return s.decideSide(func() ([]EventDraft, error) { return one(s.side.messages.DecideMessage(s.k.g, in)) }, s.side.messages.FoldAll)
}

func (s *scenario) messageLines() string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(s.side.messages)) {
		m := s.side.messages[id]
		fmt.Fprintf(&b, "%s author=%s state=%s rev=%d conversation=%s\n", id, m.Author.ID, m.State, m.Revision, m.ConversationID)
	}
	return b.String()
}

func (s *scenario) grant() string {
	by := actorNamed(s.str("by", owner.ID))
	g := &protocol.CooperationOverrideGrant{GrantID: s.need("id"), MissionID: s.missionID(), GroupID: s.k.g.GroupID,
		Policy: s.need("policy"), Grantee: actorNamed(s.need("grantee")), TargetCommandType: protocol.CommandType(s.need("command")),
		TargetActionID: s.need("action"), Reason: "needed", Approver: by,
		GrantedAt: protocol.NewTime(s.k.now.Add(s.duration("granted", "0"))), ExpiresAt: protocol.NewTime(s.k.now.Add(s.duration("expires-in", "1h")))}
	in := s.send(Input{Type: protocol.CmdPolicyGrantCooperationOverride, GroupID: s.k.g.GroupID, ActionID: "act-grant", Payload: g}, owner.ID, false)
	return s.decideSide(func() ([]EventDraft, error) { return one(s.side.grants.DecideGrant(s.k.g, in, s.side, s.k.now)) }, s.foldGrants)
}

func (s *scenario) foldGrants(ds []EventDraft) {
	for _, d := range ds {
		s.side.grants.Fold(d)
	}
}

// cite is the authority's policy gate for a command citing a grant: the
// grant must bind it exactly; it lets the command through the policy it
// names, and is consumed whenever the command is accepted.
func (s *scenario) cite() string {
	in := s.byWorker(Input{Type: protocol.CommandType(s.need("command")), ActionID: s.need("action"), GroupID: s.k.g.GroupID})
	var refused error
	if p := s.str("refused-by", "none"); p != "none" {
		refused = PolicyError(protocol.CodeAuthForbidden, p, "over the %s limit", p)
	}
	return s.decideSide(func() ([]EventDraft, error) {
		g, err := s.side.grants.Match(s.k.g, in, s.need("grant"), s.k.now)
		if err != nil {
			return nil, err
		}
		if g, err = Gate(g, refused); err != nil {
			return nil, err
		}
		return []EventDraft{Consume(g, in)}, nil
	}, s.foldGrants)
}

func (s *scenario) publish() string {
	id, by := s.need("id"), s.need("by")
	c := s.side.cards[by]
	m := protocol.ArtifactManifest{ContentHash: s.need("hash"), MissionID: s.missionID(), GroupID: s.k.g.GroupID, WorkItemID: id,
		SourceArtifacts: s.list("sources"), Producer: protocol.ArtifactProducer{AgentID: by, AgentCardHash: s.str("card-hash", c.Hash), AgentVersion: s.str("version", c.AgentVersion)}}
	pl := &protocol.PublishArtifactPayload{Manifest: m}
	if !s.has("outside-lease") {
		if w := s.k.g.Items[id]; w != nil {
			pl.OwnershipEpoch, pl.LeaseID = protocol.Uint64(s.epoch(id)), s.lease(id)
		}
	}
	in := s.byWorker(Input{Type: protocol.CmdArtifactPublish, GroupID: s.k.g.GroupID, Payload: pl})
	return s.decideSide(func() ([]EventDraft, error) {
		if err := CheckManifestScope(s.k.g, in); err != nil {
			return nil, err
		}
		return one(s.side.artifacts.DecidePublish(s.k.g, in, s.side, s.k.now))
	}, func(ds []EventDraft) {
		for _, d := range ds {
			s.side.artifacts.Fold(d)
		}
	})
}

// usageRecord charges the WorkItem's contract and the Mission, as the
// authority does for a Group without ancestors.
func (s *scenario) usageRecord() string {
	id := s.need("id")
	delta := protocol.Usage{Tokens: s.number(s.need("tokens"))}
	pl := &protocol.RecordResourceUsagePayload{WorkItemID: id, UsageDelta: delta}
	if s.k.g.Items[id] != nil {
		pl.OwnershipEpoch, pl.LeaseID = s.epoch(id), s.lease(id)
	}
	in := s.byWorker(Input{Type: protocol.CmdResourceUsageRecord, GroupID: s.k.g.GroupID, Payload: pl})
	var used protocol.Usage
	return s.decideSide(func() ([]EventDraft, error) {
		w, err := CheckUsageRecord(s.k.g, in, s.k.now)
		if err != nil {
			return nil, err
		}
		used = s.side.usage[id].Add(delta)
		if err := CheckItemBudget(w, used); err != nil {
			return nil, err
		}
		var subtree protocol.Usage
		for _, u := range s.side.usage {
			subtree = subtree.Add(u)
		}
		if err := CheckMissionBudget(s.k.g.Mission, subtree.Add(delta), false); err != nil {
			return nil, err
		}
		return []EventDraft{UsageDraft(w, in.Actor, pl.OwnershipEpoch, pl.LeaseID, delta, used, 1, 1)}, nil
	}, func(ds []EventDraft) {
		s.side.usage[id] = used
		if err := s.k.g.FoldAll(ds, s.k.now); err != nil {
			s.t.Fatal(err)
		}
	})
}
