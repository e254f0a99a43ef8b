package group

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestScenarios runs the scenario files under testdata/scenarios: the
// rules of spec 10.2 (and docs/design.md §11) written as readable
// command/outcome transcripts. `go test ./group/ -run TestScenarios -rewrite`
// regenerates the expected outputs from the current implementation; review
// the diff before committing it.
//
// A file is a list of cases, `subtest <row>/<case>` … `subtest end`, each
// starting from an empty Group "grp-a" on a clock at t0. Every accepted input
// goes through the kit, so Fold of its events is checked against the
// decision (kit.fold and the decidedCheck of foldcheck_test.go); every
// refusal is checked to be a *protocol.Error that changed nothing.
//
// Directives (arguments in brackets are optional):
//
//	limits                               the Group's limits
//	given mission                        Mission mis-a (alice) with coordinator coord, epoch 1, lease 10h
//	given id=W state=S                   drive a fresh WorkItem W to S as kit.to does (owner w1)
//	advance D                            step the clock by D (5m, 90s, 1h)
//	state id=W                           one line: state, revision, owner, epoch, lease, offer, blocker, child
//	mission                              one line: state, revision, owner, coordinator, epoch
//
//	mission-create [id=]                 mission.create
//	assign-coordinator agent= [lease=]   mission.assign_coordinator
//	renew-coordinator [lease=]           mission.renew_coordinator
//	submit-for-approval | approve | request-changes | mission-cancel | terminate
//	follow-up predecessor=STATE|none     mission.create_follow_up in this (empty) Group, of mis-a in STATE
//	child id= child= policy=block|fail   mission.create_child for WorkItem id
//	child-outcome id= child= state=      the linked child Mission ended in state
//
//	propose id= [parent=]                work.propose
//	authorize id= [proposal=] [deps=a:verified,…] [approval=required] [missing=goal|acceptance-criteria|budgets|deadline|risk-class]
//	offer id= offer= candidates=a,b|none [expires-in=5m] [start-within=] [revise] [contract-rev=]
//	accept id= [offer=] [contract-rev=]  work.accept_offer
//	grant-execution id= [approval=] [expires-in=] [contract-rev=]
//	start id= [epoch=] [resume=last|ID]
//	renew | checkpoint | block id= [epoch=] [lease=]
//	submit id= [epoch=] [lease=] [evidence=ac-1,…] [artifacts=none]
//	unblock | accept-result | cancel id=
//	fail id= [epoch= lease=] [evidence=…] the worker form when epoch or lease is given
//	insert-dependency id= deps= [contract-rev=]
//
// Every command takes by=NAME, the sender: alice (the MissionOwner) and
// mallory are humans, org-policy is an Organization service, any other name
// is an agent. Coordinator commands default to the current coordinator,
// MissionOwner commands to alice; worker commands need by=. Agents send with
// session=1 unless session= says otherwise; coordinator commands from an
// agent carry coord-epoch=current (also previous, none or a number).
// expected-rev=N sets the expected revision.
//
// References keep files readable: epoch=current (default: the latest
// ownership epoch granted), previous, next or a number; lease=current
// (default: the WorkItem's lease, else the last one issued), previous, none
// or Ln, the n-th execution lease issued for the WorkItem, which is also how
// leases print; offer=current (default: the standing offer, else the last
// one), previous or an id.
//
// Output: one line per event, `<type> <aggregate kind>/<id> rev=<n> <key
// fields>`, then `effect …` lines; a refusal is `error: <CODE> [<pointer>]
// [reason=<details.reason>]`, never the message text. Times print relative
// to t0; `x@t` is x held until t.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "scenarios"), func(t *testing.T, path string) {
		cases := map[*testing.T]*scenario{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			s := cases[t]
			if s == nil {
				s = newScenario(t)
				cases[t] = s
			}
			return s.run(td)
		})
	})
}

// scenarioLimits are the kit's limits with the default candidate bound, so
// the files show the bound of DefaultLimits (1 … 8).
func scenarioLimits() Limits {
	l := testLimits()
	l.MaxCandidates = DefaultLimits().MaxCandidates
	return l
}

// scenario is one case: a kit and the names the files use for leases,
// offers and checkpoints.
type scenario struct {
	t      *testing.T
	k      *kit
	td     *datadriven.TestData
	leases map[string][]string // per WorkItem, lease ids in the order issued
	offers map[string][]string // per WorkItem, offer ids in the order made
	ckpts  map[string]int      // per WorkItem, checkpoints taken
	side   *side               // memberships, messages, grants, artifacts, usage
}

func newScenario(t *testing.T) *scenario {
	return &scenario{
		t:      t,
		k:      &kit{t: t, g: NewGroup("grp-a", scenarioLimits()), now: t0},
		leases: map[string][]string{},
		offers: map[string][]string{},
		ckpts:  map[string]int{},
		side:   newSide(),
	}
}

// scenarioCommand is one directive: the arguments it reads besides the
// common ones (by, session, coord-epoch, expected-rev) and what it does.
type scenarioCommand struct {
	args string
	run  func(s *scenario) string
}

var scenarioCommands = map[string]scenarioCommand{
	"limits":              {"", (*scenario).limits},
	"given":               {"id state mission", (*scenario).given},
	"advance":             {"*", (*scenario).advance},
	"state":               {"id", func(s *scenario) string { return s.stateLine(s.need("id")) }},
	"mission":             {"", (*scenario).missionLine},
	"mission-create":      {"id", (*scenario).missionCreate},
	"assign-coordinator":  {"agent lease", (*scenario).assignCoordinator},
	"renew-coordinator":   {"lease", (*scenario).renewCoordinator},
	"submit-for-approval": {"", (*scenario).submitForApproval},
	"approve":             {"", (*scenario).approve},
	"request-changes":     {"", (*scenario).requestChanges},
	"mission-cancel":      {"", (*scenario).missionCancel},
	"terminate":           {"", (*scenario).terminate},
	"follow-up":           {"predecessor", (*scenario).followUp},
	"child":               {"id child policy", (*scenario).child},
	"child-outcome":       {"id child state", (*scenario).childOutcome},
	"propose":             {"id parent", (*scenario).propose},
	"authorize":           {"id proposal deps approval missing", (*scenario).authorize},
	"offer":               {"id offer candidates expires-in start-within revise contract-rev", (*scenario).offer},
	"accept":              {"id offer contract-rev", (*scenario).accept},
	"grant-execution":     {"id approval expires-in contract-rev", (*scenario).grantExecution},
	"start":               {"id epoch resume", (*scenario).start},
	"renew":               {"id epoch lease", (*scenario).leased},
	"checkpoint":          {"id epoch lease", (*scenario).leased},
	"block":               {"id epoch lease", (*scenario).leased},
	"submit":              {"id epoch lease evidence artifacts", (*scenario).leased},
	"unblock":             {"id", (*scenario).unblock},
	"accept-result":       {"id contract-rev", (*scenario).acceptResult},
	"fail":                {"id epoch lease evidence", (*scenario).fail},
	"cancel":              {"id", (*scenario).cancel},
	"insert-dependency":   {"id deps contract-rev", (*scenario).insertDependency},
}

func (s *scenario) run(td *datadriven.TestData) string {
	s.td = td
	c, ok := scenarioCommands[td.Cmd]
	if !ok {
		td.Fatalf(s.t, "unknown command %q", td.Cmd)
	}
	if c.args != "*" {
		allowed := append(strings.Fields(c.args), "by", "session", "coord-epoch", "expected-rev")
		for _, a := range td.CmdArgs {
			if !slices.Contains(allowed, a.Key) {
				td.Fatalf(s.t, "%s: unknown argument %q", td.Cmd, a.Key)
			}
		}
	}
	return c.run(s)
}

// Arguments.

func (s *scenario) has(key string) bool { return s.td.HasArg(key) }

func (s *scenario) str(key, def string) string {
	a, ok := s.td.Arg(key)
	if !ok {
		return def
	}
	return strings.Join(a.Vals, ",")
}

func (s *scenario) need(key string) string {
	v := s.str(key, "")
	if v == "" {
		s.td.Fatalf(s.t, "%s: %s= is required", s.td.Cmd, key)
	}
	return v
}

func (s *scenario) list(key string) []string {
	v := s.str(key, "")
	if v == "" || v == "none" {
		return nil
	}
	return strings.Split(v, ",")
}

func (s *scenario) number(v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		s.td.Fatalf(s.t, "%s: %q is not a number", s.td.Cmd, v)
	}
	return n
}

func (s *scenario) duration(key, def string) time.Duration {
	v := s.str(key, def)
	if v == "0" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s.td.Fatalf(s.t, "%s: %s=%q: %v", s.td.Cmd, key, v, err)
	}
	return d
}

// actorNamed maps the names the files use to actors.
func actorNamed(name string) protocol.Actor {
	switch name {
	case owner.ID, stranger.ID:
		return protocol.Actor{Kind: protocol.ActorHuman, ID: name}
	case orgPolicy.ID:
		return orgPolicy
	}
	return agent(name)
}

// item returns WorkItem id, failing the case when it does not exist.
func (s *scenario) item(id string) *WorkItem {
	w := s.k.g.Items[id]
	if w == nil {
		s.td.Fatalf(s.t, "%s: no WorkItem %q", s.td.Cmd, id)
	}
	return w
}

func (s *scenario) contractOf(id string) protocol.WorkContract {
	if w := s.k.g.Items[id]; w != nil {
		return w.Contract
	}
	return testContract(id)
}

// epoch resolves epoch= against the WorkItem's latest granted epoch.
func (s *scenario) epoch(id string) uint64 {
	last := s.item(id).LastOwnershipEpoch
	switch v := s.str("epoch", "current"); v {
	case "current":
		return last
	case "previous":
		return last - 1
	case "next":
		return last + 1
	default:
		return s.number(v)
	}
}

// lease resolves lease= to a lease id.
func (s *scenario) lease(id string) string {
	issued := s.leases[id]
	switch v := s.str("lease", "current"); {
	case v == "current":
		if l := s.item(id).Lease; l != nil {
			return l.LeaseID
		}
		if len(issued) > 0 {
			return issued[len(issued)-1]
		}
		return "lease-none"
	case v == "previous":
		if len(issued) < 2 {
			s.td.Fatalf(s.t, "%s: %s has no previous lease", s.td.Cmd, id)
		}
		return issued[len(issued)-2]
	case v == "none":
		return "lease-none"
	case strings.HasPrefix(v, "L"):
		n := s.number(v[1:])
		if n == 0 || int(n) > len(issued) {
			s.td.Fatalf(s.t, "%s: %s has no lease %s", s.td.Cmd, id, v)
		}
		return issued[n-1]
	default:
		return v
	}
}

// offerID resolves offer= to an offer id.
func (s *scenario) offerID(id string) string {
	made := s.offers[id]
	switch v := s.str("offer", "current"); v {
	case "current":
		if w := s.k.g.Items[id]; w != nil && w.Offer != nil {
			return w.Offer.OfferID
		}
		if len(made) > 0 {
			return made[len(made)-1]
		}
		return "of-none"
	case "previous":
		if len(made) < 2 {
			s.td.Fatalf(s.t, "%s: %s has no previous offer", s.td.Cmd, id)
		}
		return made[len(made)-2]
	default:
		return v
	}
}

func (s *scenario) coordinator() *protocol.CoordinatorLease {
	if m := s.k.g.Mission; m != nil {
		return m.Coordinator
	}
	return nil
}

// send sets the sender of in from by= (defaulting to def) and its epochs:
// an agent sends with its session epoch, and with a coordinator epoch when
// the command acts on the coordinator lease.
func (s *scenario) send(in Input, def string, onCoordinatorLease bool) Input {
	if def == "" {
		def = s.need("by")
	}
	in.Actor = actorNamed(s.str("by", def))
	in.SessionEpoch, in.CoordinatorEpoch = nil, nil
	if in.Actor.Kind == protocol.ActorAgent {
		in.SessionEpoch = protocol.Uint64(s.number(s.str("session", "1")))
		if onCoordinatorLease {
			var cur uint64
			if c := s.coordinator(); c != nil {
				cur = c.CoordinatorEpoch
			}
			switch v := s.str("coord-epoch", "current"); v {
			case "current":
				in.CoordinatorEpoch = protocol.Uint64(cur)
			case "previous":
				in.CoordinatorEpoch = protocol.Uint64(cur - 1)
			case "none":
			default:
				in.CoordinatorEpoch = protocol.Uint64(s.number(v))
			}
		}
	}
	if s.has("expected-rev") {
		in.ExpectedRevision = protocol.Uint64(s.number(s.str("expected-rev", "")))
	}
	return in
}

// coordinatorName is the default sender of coordinator commands.
func (s *scenario) coordinatorName() string {
	if c := s.coordinator(); c != nil {
		return c.AgentID
	}
	return "coord"
}

func (s *scenario) byCoordinator(in Input) Input { return s.send(in, s.coordinatorName(), true) }
func (s *scenario) byOwner(in Input) Input       { return s.send(in, owner.ID, true) }
func (s *scenario) byWorker(in Input) Input      { return s.send(in, "", false) }

// Running inputs.

// exec runs one decision and renders its outcome. A refusal must be a
// *protocol.Error that emitted nothing and changed nothing.
func (s *scenario) exec(do func() (Outcome, error)) (string, bool) {
	s.t.Helper()
	before := snapshot(s.t, s.k.g)
	out, err := do()
	var b strings.Builder
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			s.td.Fatalf(s.t, "error %T is not a *protocol.Error: %v", err, err)
		}
		if len(out.Events) != 0 {
			s.td.Fatalf(s.t, "refusal %v came with %d events", err, len(out.Events))
		}
		if after := snapshot(s.t, s.k.g); after != before {
			s.td.Fatalf(s.t, "refusal %v changed state\nbefore %s\nafter  %s", err, before, after)
		}
		b.WriteString("error: " + string(pe.Code))
		if pe.Pointer != "" {
			b.WriteString(" " + pe.Pointer)
		}
		if r, ok := pe.Details["reason"].(string); ok {
			b.WriteString(" reason=" + r)
		}
		b.WriteString("\n")
	} else {
		if len(out.Events) == 0 {
			s.td.Fatalf(s.t, "accepted without events")
		}
		for _, e := range out.Events {
			b.WriteString(s.event(e) + "\n")
		}
	}
	for _, e := range out.Effects {
		b.WriteString(s.effect(e) + "\n")
	}
	return b.String(), err == nil
}

func (s *scenario) do(in Input) string {
	out, _ := s.exec(func() (Outcome, error) { return s.k.apply(in) })
	s.syncCoordinator()
	return out
}

// quiet applies a setup input that must be accepted.
func (s *scenario) quiet(in Input) {
	s.t.Helper()
	out, err := s.k.apply(in)
	if err != nil {
		s.td.Fatalf(s.t, "given: %s by %s refused: %v", in.Type, in.Actor.ID, err)
	}
	for _, e := range out.Events {
		s.event(e)
	}
	s.syncCoordinator()
}

// syncCoordinator keeps the kit's notion of the coordinator current, so
// kit builders sign with the right epoch.
func (s *scenario) syncCoordinator() {
	if c := s.coordinator(); c != nil {
		s.k.coord, s.k.epoch = c.AgentID, c.CoordinatorEpoch
	}
}

// Rendering.

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	v := d.String()
	for _, z := range []string{"h0m0s", "m0s"} {
		if strings.HasSuffix(v, z) {
			return v[:len(v)-len(z)+1]
		}
	}
	return v
}

func fmtT(t protocol.Time) string {
	d := t.Sub(t0)
	switch {
	case d == 0:
		return "t0"
	case d < 0:
		return "t0-" + fmtDur(-d)
	}
	return "t0+" + fmtDur(d)
}

// leaseName is the short form of a lease id: Ln, the n-th issued for the
// WorkItem.
func (s *scenario) leaseName(id, leaseID string) string {
	if i := slices.Index(s.leases[id], leaseID); i >= 0 {
		return "L" + strconv.Itoa(i+1)
	}
	return leaseID
}

type fields []string

func (f *fields) add(k string, v any) { *f = append(*f, fmt.Sprintf("%s=%v", k, v)) }

func (f *fields) opt(k, v string) {
	if v != "" {
		f.add(k, v)
	}
}

func (f *fields) grant(g *protocol.OwnershipGrant) {
	if g != nil {
		f.add("owner", g.OwnerAgentID)
		f.add("epoch", g.OwnershipEpoch)
	}
}

func (f *fields) epochPtr(k string, e *uint64) {
	if e != nil {
		f.add(k, *e)
	}
}

// event renders one event and records the lease and offer ids it issues.
func (s *scenario) event(e EventDraft) string {
	f := fields{fmt.Sprintf("%s %s/%s rev=%d", e.Type, e.Aggregate.Kind, e.Aggregate.ID, e.Revision)}
	id := e.Aggregate.ID
	switch p := e.Payload.(type) {
	case MissionPayload:
		f.add("state", p.Ref().State)
	case WorkPayload:
		f.add("state", p.Ref().State)
	case *Proposed:
		f.add("state", p.State)
	}
	switch p := e.Payload.(type) {
	case *MissionCreated:
		f.add("owner", p.Mission.Owner.ID)
		f.opt("follow-up-of", p.FollowUpOf)
		if p.Parent != nil {
			f.add("parent", p.Parent.MissionID+"/"+p.Parent.WorkItemID)
		}
	case *CoordinatorAssigned:
		f.add("coordinator", p.Coordinator.AgentID+"@"+fmtT(p.Coordinator.LeaseExpiresAt))
		f.add("epoch", p.Coordinator.CoordinatorEpoch)
		f.epochPtr("previous-epoch", p.PreviousCoordinatorEpoch)
	case *CoordinatorRenewed:
		f.add("coordinator", p.Coordinator.AgentID+"@"+fmtT(p.Coordinator.LeaseExpiresAt))
		f.add("epoch", p.Coordinator.CoordinatorEpoch)
	case *MissionApproved:
		f.add("approval", p.ApprovalID)
	case *MissionClosed:
		f.opt("unfinished", strings.Join(p.UnfinishedWorkItems, ","))
	case *ChildCreated:
		f.add("child", p.Child.ChildMissionID)
		f.add("parent", p.Child.ParentWorkItemID)
		f.add("policy", p.Child.OnChildFailure)
	case *FollowUpCreated:
		f.add("follow-up-of", p.FollowUpOf)
	case *Authorized:
		f.add("contract-rev", p.ContractRevision)
		f.opt("proposal", p.ProposalID)
	case *ContractRevised:
		f.add("contract-rev", p.ContractRevision)
		f.add("previous-rev", p.PreviousRevision)
		var deps []string
		for _, d := range p.Dependencies {
			deps = append(deps, d.WorkItemID+":"+string(d.Policy))
		}
		f.opt("deps", strings.Join(deps, ","))
	case *OfferCreated:
		s.offers[id] = append(s.offers[id], p.OfferID)
		var cs []string
		for _, c := range p.Candidates {
			cs = append(cs, c.AgentID)
		}
		f.add("offer", p.OfferID+"@"+fmtT(*p.OfferExpiresAt))
		f.add("candidates", strings.Join(cs, ","))
		f.epochPtr("fenced-epoch", p.FencedOwnershipEpoch)
		if p.Checkpoint != nil {
			f.add("from-checkpoint", p.Checkpoint.CheckpointID)
		}
	case *OfferAccepted:
		f.add("offer", p.OfferID)
		f.grant(p.Ownership)
		f.add("start-by", fmtT(p.Ownership.StartDeadline))
		if p.RenewedAcceptance {
			f.add("renewed", true)
		}
	case *ExecutionGranted:
		f.add("approval", p.Approval.ApprovalID)
		if p.Approval.ExpiresAt != nil {
			f.add("until", fmtT(*p.Approval.ExpiresAt))
		}
	case *Started:
		if !slices.Contains(s.leases[id], p.Lease.LeaseID) {
			s.leases[id] = append(s.leases[id], p.Lease.LeaseID)
		}
		f.grant(p.Ownership)
		f.add("lease", s.leaseName(id, p.Lease.LeaseID)+"@"+fmtT(p.Lease.ExpiresAt))
		f.opt("resume", p.ResumeFromCheckpoint)
	case *Progressed:
		f.add("lease", s.leaseName(id, p.LeaseID))
		if p.Lease != nil {
			f.add("until", fmtT(p.Lease.ExpiresAt))
			f.add("renewals", len(p.Lease.Renewals))
		}
		f.opt("reason", p.Reason)
	case *Checkpointed:
		f.add("lease", s.leaseName(id, p.LeaseID))
		f.add("checkpoint", p.Checkpoint.CheckpointID)
		f.grant(p.Ownership)
		if p.Ownership != nil {
			f.add("start-by", fmtT(p.Ownership.StartDeadline))
		}
	case *Blocked:
		if p.LeaseID != "" {
			f.add("lease", s.leaseName(id, p.LeaseID))
		}
		f.add("blocker", p.Blocker.Kind)
		f.grant(p.Ownership)
		if p.BlockedUntil != nil {
			f.add("until", fmtT(*p.BlockedUntil))
		}
		f.opt("child", p.ChildMissionID)
	case *Unblocked:
		f.grant(p.Ownership)
		if p.Ownership != nil {
			f.add("start-by", fmtT(p.Ownership.StartDeadline))
		}
		f.epochPtr("fenced-epoch", p.FencedOwnershipEpoch)
	case *Submitted:
		f.add("lease", s.leaseName(id, p.LeaseID))
		f.grant(p.Ownership)
		f.add("artifacts", len(p.Artifacts))
	case *ResultAccepted:
		f.add("contract-rev", p.ContractRevision)
		f.opt("child", p.ChildMissionID)
		f.opt("child-approval", p.ChildApprovalID)
	case *Failed:
		if p.LeaseID != "" {
			f.add("lease", s.leaseName(id, p.LeaseID))
		}
		f.grant(p.Ownership)
		f.opt("child", p.ChildMissionID)
	}
	return strings.Join(f, " ")
}

func (s *scenario) effect(e Effect) string {
	switch e := e.(type) {
	case LateResult:
		return fmt.Sprintf("effect late-result %s by=%s epoch=%d lease=%s code=%s", e.WorkItemID, e.Actor.ID, e.OwnershipEpoch, s.leaseName(e.WorkItemID, e.LeaseID), e.Code)
	case ChildMissionRequested:
		l := e.Link
		return fmt.Sprintf("effect child-mission-requested %s group=%s owner=%s parent=%s/%s policy=%s ancestors=%s",
			l.MissionID, l.GroupID, l.Owner.ID, l.Parent.MissionID, l.Parent.WorkItemID, l.Parent.OnChildFailure, strings.Join(l.Ancestors, ","))
	case ParentNotice:
		return fmt.Sprintf("effect parent-notice group=%s %s child=%s state=%s", e.ParentGroupID, e.Outcome.ParentWorkItemID, e.Outcome.ChildMissionID, e.Outcome.State)
	}
	return fmt.Sprintf("effect %T", e)
}

func (s *scenario) stateLine(id string) string {
	w := s.k.g.Items[id]
	if w == nil {
		if p := s.k.g.Proposals[id]; p != nil {
			return fmt.Sprintf("%s proposal state=%s rev=%d authorized-as=%s", id, p.State, p.Revision, orDash(p.AuthorizedAs))
		}
		return id + " none"
	}
	owner, lease, offer, blocker, child := "-", "-", "-", "-", "-"
	if o := w.Ownership; o != nil {
		owner = o.OwnerAgentID
		if w.State == protocol.WorkQueued {
			owner += "@" + fmtT(o.StartDeadline)
		}
	}
	if l := w.Lease; l != nil {
		lease = s.leaseName(id, l.LeaseID) + "@" + fmtT(l.ExpiresAt)
	}
	if o := w.Offer; o != nil {
		offer = o.OfferID + "@" + fmtT(o.ExpiresAt)
	}
	if b := w.Blocker; b != nil {
		blocker = string(b.Kind)
		if w.BlockedUntil != nil {
			blocker += "@" + fmtT(*w.BlockedUntil)
		}
	}
	if w.ChildMissionID != "" {
		child = w.ChildMissionID + "/" + string(w.ChildFailure)
	}
	return fmt.Sprintf("%s state=%s rev=%d owner=%s epoch=%d lease=%s offer=%s blocker=%s child=%s",
		id, w.State, w.Revision, owner, w.LastOwnershipEpoch, lease, offer, blocker, child)
}

func orDash(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// Inspection and setup.

func (s *scenario) limits() string {
	l := s.k.g.Limits
	return fmt.Sprintf("max-candidates=%d start-within=%s lease=%s blocked-hold=%s",
		l.MaxCandidates, fmtDur(l.StartWithin), fmtDur(l.LeaseDuration), fmtDur(l.BlockedHold))
}

func (s *scenario) advance() string {
	if len(s.td.CmdArgs) != 1 || len(s.td.CmdArgs[0].Vals) != 0 {
		s.td.Fatalf(s.t, "usage: advance DURATION")
	}
	d, err := time.ParseDuration(s.td.CmdArgs[0].Key)
	if err != nil || d < 0 {
		s.td.Fatalf(s.t, "advance: %q is not a duration", s.td.CmdArgs[0].Key)
	}
	s.k.advance(d)
	return "now=" + fmtT(protocol.NewTime(s.k.now))
}

func (s *scenario) missionLine() string {
	m := s.k.g.Mission
	if m == nil {
		return "mission none"
	}
	coord, epoch := "-", uint64(0)
	if c := m.Coordinator; c != nil {
		coord, epoch = c.AgentID+"@"+fmtT(c.LeaseExpiresAt), c.CoordinatorEpoch
	}
	return fmt.Sprintf("%s state=%s rev=%d owner=%s coordinator=%s epoch=%d", m.MissionID, m.State, m.Revision, m.Owner.ID, coord, epoch)
}

// given drives the Group to a state without printing the steps: the
// Mission (given mission) or a fresh WorkItem, by kit.to's route.
func (s *scenario) given() string {
	if s.has("mission") {
		s.quiet(s.k.human(protocol.CmdMissionCreate, &protocol.CreateMissionPayload{
			MissionID: "mis-a", Title: "Fix bug", Objective: "ship the fix", PriorityClass: protocol.PriorityNormal,
		}))
		s.quiet(s.k.human(protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{
			MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64((10 * time.Hour).Milliseconds()),
		}))
		return s.missionLine()
	}
	id, st := s.need("id"), protocol.WorkItemState(s.need("state"))
	if s.k.g.Mission == nil {
		s.td.Fatalf(s.t, "given id=%s: no Mission yet (given mission)", id)
	}
	k := s.k
	s.quiet(k.coordIn(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: testContract(id)}))
	switch st {
	case protocol.WorkOpen:
	case protocol.WorkFailed:
		s.quiet(k.failIn(id))
	case protocol.WorkCancelled:
		s.quiet(k.cancelIn(id))
	default:
		s.quiet(k.coordIn(protocol.CmdWorkOffer, k.offerPayload(id, "of-"+id, "w1", "w2")))
		if st == protocol.WorkOffered {
			break
		}
		s.quiet(k.acceptIn("w1", id, "of-"+id))
		if st == protocol.WorkQueued {
			break
		}
		s.quiet(k.startIn("w1", id, k.epochOf(id)))
		e, l := k.epochOf(id), k.leaseOf(id)
		switch st {
		case protocol.WorkActive:
		case protocol.WorkBlocked:
			s.quiet(s.withCheckpoint(id, k.blockIn("w1", id, e, l)))
		case protocol.WorkSubmitted, protocol.WorkVerified:
			s.quiet(k.submitIn("w1", id, e, l))
			if st == protocol.WorkVerified {
				s.quiet(k.acceptResultIn(id))
			}
		default:
			s.td.Fatalf(s.t, "given: cannot reach %s", st)
		}
	}
	if got := s.item(id).State; got != st {
		s.td.Fatalf(s.t, "given: %s is %s, want %s", id, got, st)
	}
	return s.stateLine(id)
}

// withCheckpoint names the checkpoint a checkpoint or block takes ck-n,
// the n-th for that WorkItem.
func (s *scenario) withCheckpoint(id string, in Input) Input {
	s.ckpts[id]++
	name := fmt.Sprintf("ck-%d", s.ckpts[id])
	switch p := in.Payload.(type) {
	case *protocol.CheckpointWorkPayload:
		p.CheckpointID = name
	case *protocol.BlockWorkPayload:
		p.CheckpointID = name
	}
	return in
}

// Mission commands.

func (s *scenario) missionID() string {
	if m := s.k.g.Mission; m != nil {
		return m.MissionID
	}
	return "mis-a"
}

func (s *scenario) missionCreate() string {
	return s.do(s.send(s.k.human(protocol.CmdMissionCreate, &protocol.CreateMissionPayload{
		MissionID: s.str("id", "mis-a"), Title: "Fix bug", Objective: "ship the fix", PriorityClass: protocol.PriorityNormal,
	}), owner.ID, false))
}

func (s *scenario) assignCoordinator() string {
	return s.do(s.send(s.k.human(protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{
		MissionID: s.missionID(), AgentID: s.need("agent"), LeaseDurationMs: uint64(s.duration("lease", "10h").Milliseconds()),
	}), owner.ID, false))
}

func (s *scenario) renewCoordinator() string {
	return s.do(s.byCoordinator(s.k.human(protocol.CmdMissionRenewCoordinator, &protocol.RenewCoordinatorPayload{
		MissionID: s.missionID(), LeaseDurationMs: uint64(s.duration("lease", "10h").Milliseconds()),
	})))
}

func (s *scenario) submitForApproval() string {
	return s.do(s.byCoordinator(s.k.human(protocol.CmdMissionSubmitForApproval, &protocol.SubmitForApprovalPayload{
		MissionID: s.missionID(), Summary: "done", Evidence: protocol.List[protocol.Evidence]{evidence(s.missionID(), "ac-1")},
	})))
}

func (s *scenario) approve() string {
	return s.do(s.byOwner(s.k.human(protocol.CmdMissionApprove, &protocol.ApproveMissionPayload{MissionID: s.missionID(), ApprovalID: "apr-m"})))
}

func (s *scenario) requestChanges() string {
	return s.do(s.byOwner(s.k.human(protocol.CmdMissionRequestChanges, &protocol.RequestChangesPayload{
		MissionID: s.missionID(), Changes: protocol.List[string]{"add docs"},
	})))
}

func (s *scenario) missionCancel() string {
	return s.do(s.byOwner(s.k.human(protocol.CmdMissionCancel, &protocol.CancelMissionPayload{MissionID: s.missionID(), Reason: "priorities changed"})))
}

func (s *scenario) terminate() string {
	return s.do(s.byCoordinator(s.k.human(protocol.CmdMissionTerminate, &protocol.TerminateMissionPayload{MissionID: s.missionID(), Reason: "runaway"})))
}

func (s *scenario) followUp() string {
	in := s.send(s.k.human(protocol.CmdMissionCreateFollowUp, &protocol.CreateFollowUpPayload{
		MissionID: "mis-f", FollowUpOf: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal,
	}), owner.ID, false)
	if st := s.need("predecessor"); st != "none" {
		in.Predecessor = &protocol.Mission{MissionID: "mis-a", State: protocol.MissionState(st)}
	}
	return s.do(in)
}

func (s *scenario) child() string {
	return s.do(s.byCoordinator(s.k.createChildIn(s.need("id"), s.need("child"), protocol.ChildFailurePolicy(s.need("policy")))))
}

func (s *scenario) childOutcome() string {
	o := ChildOutcome{
		ParentWorkItemID: s.need("id"), ChildMissionID: s.need("child"), ChildGroupID: "grp-" + s.need("child"),
		State: protocol.MissionState(s.need("state")), CausationID: "evt-child",
	}
	if o.State == protocol.MissionApproved {
		o.ApprovalID = "apr-c"
	}
	out, _ := s.exec(func() (Outcome, error) { return s.k.childOutcome(o) })
	return out
}

// WorkItem commands.

func (s *scenario) propose() string {
	return s.do(s.send(s.k.human(protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{
		ProposalID: s.need("id"), MissionID: s.missionID(), Summary: "split parser", ParentWorkItemID: s.str("parent", ""),
	}), "w1", false))
}

func (s *scenario) deps() []protocol.Dependency {
	var deps []protocol.Dependency
	for _, d := range s.list("deps") {
		id, policy, ok := strings.Cut(d, ":")
		if !ok {
			s.td.Fatalf(s.t, "deps: %q is not id:policy", d)
		}
		deps = append(deps, protocol.Dependency{WorkItemID: id, Policy: protocol.DependencyPolicy(policy)})
	}
	return deps
}

func (s *scenario) authorize() string {
	id := s.need("id")
	c := testContract(id, s.deps()...)
	if s.str("approval", "") == "required" {
		c.Risk = protocol.Risk{Class: protocol.RiskHigh, PreExecutionApproval: true}
	}
	switch m := s.str("missing", ""); m {
	case "":
	case "goal":
		c.Goal = ""
	case "acceptance-criteria":
		c.AcceptanceCriteria = nil
	case "budgets":
		c.Budgets = protocol.Budgets{}
	case "deadline":
		c.Deadline = protocol.Time{}
	case "risk-class":
		c.Risk.Class = ""
	default:
		s.td.Fatalf(s.t, "authorize: unknown missing=%s", m)
	}
	return s.do(s.byCoordinator(s.k.human(protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{
		WorkItemID: id, MissionID: s.missionID(), Contract: c, ProposalID: s.str("proposal", ""),
	})))
}

// contractRev resolves contract-rev= (current, next or a number) against
// the WorkItem's contract revision.
func (s *scenario) contractRev(id, def string) uint64 {
	cur := s.contractOf(id).Revision
	switch v := s.str("contract-rev", def); v {
	case "current":
		return cur
	case "next":
		return cur + 1
	case "previous":
		return cur - 1
	default:
		return s.number(v)
	}
}

func (s *scenario) offer() string {
	id := s.need("id")
	cands := make(protocol.List[protocol.OfferCandidate], 0)
	for _, c := range s.list("candidates") {
		cands = append(cands, protocol.OfferCandidate{AgentID: c})
	}
	c := s.contractOf(id)
	def := "current"
	if s.has("revise") {
		c.Goal = "implement " + id + ", revised"
		def = "next"
	}
	c.Revision = s.contractRev(id, def)
	p := &protocol.OfferWorkPayload{
		WorkItemID: id, OfferID: s.need("offer"), Contract: c, Candidates: cands,
		ExpiresAt: protocol.NewTime(s.k.now.Add(s.duration("expires-in", "5m"))),
	}
	if s.has("start-within") {
		p.StartWithinMs = protocol.Uint64(uint64(s.duration("start-within", "").Milliseconds()))
	}
	return s.do(s.byCoordinator(s.k.human(protocol.CmdWorkOffer, p)))
}

func (s *scenario) accept() string {
	id := s.need("id")
	return s.do(s.byWorker(s.k.human(protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{
		WorkItemID: id, OfferID: s.offerID(id), ContractRevision: s.contractRev(id, "current"),
		ScheduleDisclosure: protocol.ScheduleDisclosure{CapacityState: protocol.CapacityAvailable},
	})))
}

func (s *scenario) grantExecution() string {
	id := s.need("id")
	p := &protocol.GrantExecutionPayload{ApprovalID: s.str("approval", "apr-1"), WorkItemID: id, ContractRevision: s.contractRev(id, "current")}
	if s.has("expires-in") {
		e := protocol.NewTime(s.k.now.Add(s.duration("expires-in", "")))
		p.ExpiresAt = &e
	}
	return s.do(s.byOwner(s.k.human(protocol.CmdApprovalGrantExecution, p)))
}

func (s *scenario) start() string {
	id := s.need("id")
	p := &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: s.epoch(id)}
	switch r := s.str("resume", ""); r {
	case "":
	case "last":
		if ck := s.item(id).Checkpoint; ck != nil {
			p.ResumeFromCheckpointID = ck.CheckpointID
		}
	default:
		p.ResumeFromCheckpointID = r
	}
	return s.do(s.byWorker(s.k.human(protocol.CmdWorkStart, p)))
}

// leased runs renew, checkpoint, block and submit: the commands that name
// the execution lease.
func (s *scenario) leased() string {
	id := s.need("id")
	e, l, a := s.epoch(id), s.lease(id), s.need("by")
	var in Input
	switch s.td.Cmd {
	case "renew":
		in = s.k.renewIn(a, id, e, l)
	case "checkpoint":
		in = s.k.checkpointIn(a, id, e, l)
	case "block":
		in = s.k.blockIn(a, id, e, l)
	case "submit":
		in = s.k.submitIn(a, id, e, l)
		p := in.Payload.(*protocol.SubmitWorkPayload)
		if s.has("evidence") {
			p.Evidence = nil
			for _, c := range s.list("evidence") {
				p.Evidence = append(p.Evidence, evidence(id, c))
			}
		}
		if s.str("artifacts", "") == "none" {
			p.Artifacts = nil
		}
	}
	if s.td.Cmd == "checkpoint" || s.td.Cmd == "block" {
		n := s.ckpts[id]
		in = s.withCheckpoint(id, in)
		out, ok := s.exec(func() (Outcome, error) { return s.k.apply(s.byWorker(in)) })
		if !ok {
			s.ckpts[id] = n
		}
		return out
	}
	return s.do(s.byWorker(in))
}

func (s *scenario) unblock() string { return s.do(s.byCoordinator(s.k.unblockIn(s.need("id")))) }

func (s *scenario) acceptResult() string {
	id := s.need("id")
	return s.do(s.byCoordinator(s.k.human(protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{
		WorkItemID: id, ContractRevision: s.contractRev(id, "current"),
	})))
}

func (s *scenario) fail() string {
	id := s.need("id")
	p := &protocol.FailWorkPayload{WorkItemID: id, Reason: "broken", Evidence: failureEv}
	if s.has("evidence") {
		p.Evidence = nil
		for _, c := range s.list("evidence") {
			p.Evidence = append(p.Evidence, evidence(id, c))
		}
	}
	if s.has("epoch") || s.has("lease") {
		p.OwnershipEpoch, p.LeaseID = protocol.Uint64(s.epoch(id)), s.lease(id)
		if s.str("lease", "") == "omit" { // the owner of a queued item has none to name
			p.LeaseID = ""
		}
		return s.do(s.byWorker(s.k.human(protocol.CmdWorkFail, p)))
	}
	return s.do(s.byCoordinator(s.k.human(protocol.CmdWorkFail, p)))
}

func (s *scenario) cancel() string { return s.do(s.byCoordinator(s.k.cancelIn(s.need("id")))) }

func (s *scenario) insertDependency() string {
	id := s.need("id")
	return s.do(s.byCoordinator(s.k.human(protocol.CmdDependencyInsert, &protocol.InsertDependencyPayload{
		WorkItemID: id, ContractRevision: s.contractRev(id, "next"), Dependencies: protocol.List[protocol.Dependency](s.deps()),
	})))
}
