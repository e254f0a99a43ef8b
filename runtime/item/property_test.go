package item

import (
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"pgregory.net/rapid"
)

// checkInvariants holds for every step, in the scenario files and under
// rapid:
//   - never two runs: only a granted lease (Launched) puts an item into
//     Running, with one StartRun, and never while a run is under way or
//     finishing; one input sends at most one outcome;
//   - never a command under an ended lease: no Send names the item's
//     lease once the worker's clock has ended it, and Due withholds such a
//     command;
//   - never a submit without the run's evidence: work.submit comes only
//     from a completed run, under its lease, with exactly the evidence the
//     handler returned (never an empty stand-in for it).
func checkInvariants(t fataler, prev Item, in Input, next Item, effs []Effect, now time.Time) {
	t.Helper()
	checkRuns(t, prev, in, next, effs)
	online := onlineOf(in)
	outcomes := 0
	for _, e := range effs {
		if s, ok := e.(Send); ok {
			outcomes += checkSend(t, prev, in, next, s, online, now)
		}
	}
	if outcomes > 1 {
		t.Fatalf("%d outcome commands for one %T", outcomes, in)
	}
	if d, ok := in.(Due); ok && len(effs) == 0 && isOutcome(d.Type) {
		if l := LeaseOf(d.Payload); l != "" && l == next.LeaseID && next.LeaseOver(d.Online, now) {
			t.Fatalf("%s let out under lease %s ended at %s", d.Type, l, next.Expires)
		}
	}
}

// checkRuns: only Launched starts a run, once, and never over another.
func checkRuns(t fataler, prev Item, in Input, next Item, effs []Effect) {
	t.Helper()
	starts := 0
	for _, e := range effs {
		if _, ok := e.(StartRun); ok {
			starts++
		}
	}
	_, launch := in.(Launched)
	switch {
	case starts > 1 || (starts == 1 && (prev.Phase == Running || prev.Phase == Finishing)):
		t.Fatalf("%d runs started from %s", starts, prev.Phase)
	case next.Phase == Running && prev.Phase != Running && !(launch && starts == 1):
		t.Fatalf("step moved %s into running on %T without starting a run", prev.Phase, in)
	case starts == 1 && !launch:
		t.Fatalf("a run started on %T", in)
	}
}

// checkSend: no command under an ended lease, a submission only from a
// completed run with its evidence. It returns 1 for an outcome command.
func checkSend(t fataler, prev Item, in Input, next Item, s Send, online bool, now time.Time) int {
	t.Helper()
	if l := LeaseOf(s.Payload); l != "" && l == next.LeaseID && next.LeaseOver(online, now) {
		t.Fatalf("%s sent under lease %s ended at %s (now %s)", s.Type, l, next.Expires, now)
	}
	if s.Type == protocol.CmdWorkSubmit {
		var r RunEnded
		switch in := in.(type) {
		case RunEnded:
			r = in
		case Reconciled:
			r = in.Run
		default:
			t.Fatalf("work.submit on %T", in)
		}
		p := s.Payload.(*protocol.SubmitWorkPayload)
		if r.End != Completed || p.LeaseID != prev.LeaseID || len(p.Evidence) != len(r.Evidence) {
			t.Fatalf("work.submit %+v from %+v", p, r)
		}
	}
	if isOutcome(s.Type) {
		return 1
	}
	return 0
}

func isOutcome(typ protocol.CommandType) bool {
	return typ == protocol.CmdWorkSubmit || typ == protocol.CmdWorkFail || typ == protocol.CmdWorkBlock
}

// onlineOf is whether the worker was online for in (true when in does not say).
func onlineOf(in Input) bool {
	switch in := in.(type) {
	case Answered:
		return in.Online
	case RunEnded:
		return in.Online
	case Due:
		return in.Online
	case StartFailed:
		return in.Online
	case Ticked:
		return in.Conn == Online
	}
	return true
}

// fataler is what checkInvariants needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

var (
	commandTypes = []protocol.CommandType{protocol.CmdWorkAcceptOffer, protocol.CmdWorkStart, protocol.CmdLeaseRenew,
		protocol.CmdWorkCheckpoint, protocol.CmdWorkSubmit, protocol.CmdWorkBlock, protocol.CmdWorkFail, protocol.CmdArtifactPublish}
	codes = []protocol.Code{protocol.CodeInternalError, protocol.CodeRevisionConflict, protocol.CodeMembershipStale,
		protocol.CodeActionIDCollision, protocol.CodeAuthInvalidSignature, protocol.CodeWorkStaleOwnership, protocol.CodeWorkLeaseExpired,
		protocol.CodeAuthForbidden, protocol.CodeInvalidStateTransition, protocol.CodeWorkAlreadyOwned, protocol.CodeInvalidCommand,
		protocol.CodeAuthStaleSession}
)

// TestStepKeepsInvariants: any sequence of inputs, at any times, keeps
// checkInvariants.
func TestStepKeepsInvariants(t *testing.T) {
	// The inputs that break a rule are a few in many: rapid's default of
	// 100 sequences misses some, 2000 (well under a second) does not.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("2000")
		defer f.Value.Set(f.DefValue)
	}
	rapid.Check(t, func(rt *rapid.T) {
		now := t0
		leases := []string{"L1", "L2"}
		it := Item{ID: "wi-1", Phase: rapid.SampledFrom([]Phase{Accepting, Queued, Starting, Running, Finishing}).Draw(rt, "phase"),
			Epoch: 1, LeaseID: rapid.SampledFrom(leases).Draw(rt, "lease"), OfferID: "of-1"}
		it.Expires = now.Add(time.Duration(rapid.IntRange(0, 300).Draw(rt, "expires")) * time.Second)
		for i, n := 0, rapid.IntRange(1, 40).Draw(rt, "steps"); i < n; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "advance")) * time.Second)
			in := drawInput(rt, leases, now)
			next, effs := Step(it, in, now)
			checkInvariants(rt, it, in, next, effs, now)
			it = next
			it.Pending = rapid.IntRange(0, 2).Draw(rt, "pending")
			it.Sending = rapid.Bool().Draw(rt, "sending")
		}
	})
}

func drawInput(rt *rapid.T, leases []string, now time.Time) Input {
	online := rapid.Bool().Draw(rt, "online")
	typ := rapid.SampledFrom(commandTypes).Draw(rt, "type")
	lease := rapid.SampledFrom(leases).Draw(rt, "payload-lease")
	var payload any
	switch typ {
	case protocol.CmdWorkSubmit:
		payload = &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: 1, LeaseID: lease}
	case protocol.CmdWorkFail:
		payload = &protocol.FailWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: protocol.Uint64(1), LeaseID: lease}
	case protocol.CmdWorkBlock:
		payload = &protocol.BlockWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: 1, LeaseID: lease}
	case protocol.CmdWorkAcceptOffer:
		payload = &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: "of-1", ContractRevision: uint64(rapid.IntRange(1, 3).Draw(rt, "rev"))}
	case protocol.CmdLeaseRenew:
		payload = &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: 1, LeaseID: lease}
	}
	var expires time.Time
	if rapid.Bool().Draw(rt, "store-shows-lease") {
		expires = now.Add(time.Duration(rapid.IntRange(-120, 120).Draw(rt, "store-expires")) * time.Second)
	}
	end := End(rapid.IntRange(1, 5).Draw(rt, "end"))
	run := RunEnded{End: end, Online: online, AgentID: "w1", Draining: rapid.Bool().Draw(rt, "draining")}
	if rapid.Bool().Draw(rt, "evidence") {
		run.Evidence = []protocol.Evidence{{Subject: "wi-1", Criteria: protocol.List[string]{"ac-1"}, Result: protocol.EvidencePass}}
	}
	switch rapid.IntRange(0, 10).Draw(rt, "input") {
	case 7:
		t := Ticked{Conn: Conn(rapid.IntRange(0, 2).Draw(rt, "conn")), Tick: time.Second, PreemptTimeout: 30 * time.Second,
			Victim: rapid.Bool().Draw(rt, "victim")}
		if rapid.Bool().Draw(rt, "grace") {
			t.Grace = now.Add(time.Duration(rapid.IntRange(-60, 300).Draw(rt, "grace-in")) * time.Second)
		}
		return t
	case 8:
		return PreemptAsked{Why: rapid.SampledFrom([]string{"scheduler", "shutdown", "offline-grace"}).Draw(rt, "why"), For: "grp/wi-2"}
	case 9:
		return Picked{Adoptable: rapid.Bool().Draw(rt, "adoptable")}
	case 10:
		a := Admission{Now: now, AgentID: "w1", Capabilities: []protocol.Capability{{ID: "c", Version: "1.0.0"}}, Capacity: 4,
			Committed: rapid.IntRange(0, 5).Draw(rt, "committed"), OfferID: "of-1", OfferedToMe: true, Owner: "w1", MissionActive: true,
			Contract: protocol.WorkContract{RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "c", Version: "1.x"}}}}
		if rapid.Bool().Draw(rt, "renewal") {
			return Renewal{Admission: a, Revision: uint64(rapid.IntRange(1, 3).Draw(rt, "rev")), OfferID: "of-1", AgentID: "w1"}
		}
		return Offered{Admission: a, ContractRevision: 1}
	case 5:
		return Launched{LeaseID: lease, Expires: now.Add(2 * time.Minute), Epoch: 1, Attempts: uint64(rapid.IntRange(0, 3).Draw(rt, "attempts"))}
	case 6:
		return StartFailed{Reason: "cannot run", AgentID: "w1", Online: online}
	case 4:
		states := []protocol.WorkItemState{protocol.WorkOffered, protocol.WorkQueued, protocol.WorkActive, protocol.WorkBlocked,
			protocol.WorkSubmitted, protocol.WorkCancelled, protocol.WorkOpen}
		return Viewed{Known: rapid.Bool().Draw(rt, "known"), State: rapid.SampledFrom(states).Draw(rt, "state"),
			Mine: rapid.Bool().Draw(rt, "mine"), OfferedToMe: rapid.Bool().Draw(rt, "offered"), OfferID: rapid.SampledFrom([]string{"of-1", "of-2"}).Draw(rt, "offer"),
			OwnershipEpoch: uint64(rapid.IntRange(1, 3).Draw(rt, "epoch")), LeaseID: lease, LeaseExpires: expires,
			StartedHere: rapid.Bool().Draw(rt, "here"), ContractRevision: uint64(rapid.IntRange(1, 3).Draw(rt, "rev")),
			AcceptedRevision: uint64(rapid.IntRange(0, 3).Draw(rt, "accepted")), Judged: rapid.Bool().Draw(rt, "judged")}
	case 0:
		var err error
		switch rapid.IntRange(0, 3).Draw(rt, "answer") {
		case 1:
			err = errors.New("lost")
		case 2, 3:
			err = protocol.Errorf(rapid.SampledFrom(codes).Draw(rt, "code"), "refused")
		}
		return Answered{Type: typ, Payload: payload, Err: err, Head: rapid.Bool().Draw(rt, "head"), Decided: rapid.Bool().Draw(rt, "decided"),
			Stopping: rapid.Bool().Draw(rt, "stopping"), Tries: rapid.IntRange(0, 8).Draw(rt, "tries"), Tick: time.Second,
			AgentID: "w1", Online: online, Draining: run.Draining}
	case 1:
		return run
	case 2:
		return Reconciled{Run: run, Expires: expires}
	}
	return Due{Type: typ, Payload: payload, Online: online, Expires: expires, Membership: uint64(rapid.IntRange(0, 2).Draw(rt, "membership"))}
}
