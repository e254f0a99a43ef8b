package item

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/missionweave/mwp-worker/protocol"
)

// t0 is where every scenario's clock starts.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// TestScenarios runs the scenario files under testdata/: the item's
// lifecycle rules as readable input/effect transcripts, one file per rule
// family. `go test ./runtime/item/ -run TestScenarios -rewrite`
// regenerates the expected outputs; review the diff before committing it.
//
// Every case (`subtest name` … `subtest end`) starts from an item
// "wi-1" with nothing decided, on a clock at t0. Directives:
//
//	item phase=P [epoch=N] [lease=L] [expires=D] [lost] [pending=N] [sending] [offer=O] [reaccepting=N] [reaccepted=N]
//	                                   set the item (expires: from now)
//	advance D                          step the clock
//	answer type=T [err=CODE|lost|stale] [pointer=P] [reason=R] [current-rev=N] [rev=N]
//	       [not-head] [decided] [stopping] [tries=N] [offline] [draining] [lease=L]
//	                                   the authority's answer to the item's command
//	ended outcome=completed|preempted|blocked|failed|lease-lost [offline] [draining] [evidence=ac-1,…] [reason=R]
//	reconciled outcome=… [expires=D]   a held outcome, the worker back online
//	due type=T [lease=L] [offline] [expires=D]
//	                                   the head command about to be sent
//	launched lease=L expires=D epoch=N attempts=N
//	                                   a lease granted for the item's start; attempts as the store counts them
//	start-failed [reason=R]            the slot could not start the run
//	view [gone] state=S [mine] [offered] [offer=O] [epoch=N] [lease=L] [expires=D] [here] [rev=N] [accepted=N] [judged]
//	                                   the store's view after a transaction: gone (not in the
//	                                   store), owned by this worker, offered to it, the lease it
//	                                   shows (here: granted to this session), the contract's and
//	                                   the accepted revision, an offer judged already
//
// Each input prints its effects, one a line, then the item.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		cases := map[*testing.T]*scenario{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			s := cases[t]
			if s == nil {
				s = &scenario{t: t, now: t0, it: Item{ID: "wi-1"}}
				cases[t] = s
			}
			return s.run(td)
		})
	})
}

type scenario struct {
	t   *testing.T
	td  *datadriven.TestData
	now time.Time
	it  Item
}

func (s *scenario) str(key, def string) string {
	a, ok := s.td.Arg(key)
	if !ok {
		return def
	}
	return strings.Join(a.Vals, ",")
}

func (s *scenario) num(key string) uint64 {
	v := s.str(key, "0")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		s.td.Fatalf(s.t, "%s: %s=%q is not a number", s.td.Cmd, key, v)
	}
	return n
}

func (s *scenario) dur(key string) time.Duration {
	d, err := time.ParseDuration(s.str(key, "0s"))
	if err != nil {
		s.td.Fatalf(s.t, "%s: %s: %v", s.td.Cmd, key, err)
	}
	return d
}

func (s *scenario) run(td *datadriven.TestData) string {
	s.td = td
	switch td.Cmd {
	case "item":
		return s.set()
	case "advance":
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			td.Fatalf(s.t, "advance: %v", err)
		}
		s.now = s.now.Add(d)
		return "t0+" + s.now.Sub(t0).String() + "\n"
	case "answer":
		return s.step(s.answer())
	case "ended":
		return s.step(s.ended())
	case "reconciled":
		in := Reconciled{Run: s.ended()}
		if s.td.HasArg("expires") {
			in.Expires = s.now.Add(s.dur("expires"))
		}
		return s.step(in)
	case "view":
		return s.step(s.view())
	case "launched":
		return s.step(Launched{LeaseID: s.str("lease", ""), Expires: s.now.Add(s.dur("expires")), Epoch: s.num("epoch"), Attempts: s.num("attempts")})
	case "start-failed":
		return s.step(StartFailed{Reason: s.str("reason", "cannot run"), AgentID: "w1", Online: !td.HasArg("offline")})
	case "due":
		in := Due{Type: s.cmdType(), Payload: s.payload(s.cmdType()), Online: !td.HasArg("offline")}
		if td.HasArg("expires") {
			in.Expires = s.now.Add(s.dur("expires"))
		}
		return s.step(in)
	}
	td.Fatalf(s.t, "unknown command %q", td.Cmd)
	return ""
}

func (s *scenario) view() Viewed {
	if s.td.HasArg("gone") {
		return Viewed{}
	}
	v := Viewed{Known: true, State: protocol.WorkItemState(s.str("state", "")), Mine: s.td.HasArg("mine"), OfferedToMe: s.td.HasArg("offered"),
		OfferID: s.str("offer", ""), OwnershipEpoch: s.num("epoch"), LeaseID: s.str("lease", ""), StartedHere: s.td.HasArg("here"),
		ContractRevision: s.num("rev"), AcceptedRevision: s.num("accepted"), Judged: s.td.HasArg("judged")}
	if s.td.HasArg("expires") {
		v.LeaseExpires = s.now.Add(s.dur("expires"))
	}
	return v
}

var phases = map[string]Phase{"accepting": Accepting, "queued": Queued, "starting": Starting, "running": Running, "finishing": Finishing}

func (s *scenario) set() string {
	p, ok := phases[s.str("phase", "")]
	if !ok {
		s.td.Fatalf(s.t, "item: phase= is one of accepting, queued, starting, running, finishing")
	}
	it := Item{ID: "wi-1", Phase: p, Epoch: s.num("epoch"), LeaseID: s.str("lease", ""), OfferID: s.str("offer", ""),
		Lost: s.td.HasArg("lost"), Sending: s.td.HasArg("sending"), Pending: int(s.num("pending")),
		Reaccepting: s.num("reaccepting"), Reaccepted: s.num("reaccepted"), Hold: s.td.HasArg("hold")}
	if s.td.HasArg("expires") {
		it.Expires = s.now.Add(s.dur("expires"))
	}
	s.it = it
	return s.line(it) + "\n"
}

// payload is a command of typ as the item's chain holds it.
func (s *scenario) payload(typ protocol.CommandType) any {
	lease := s.str("lease", s.it.LeaseID)
	switch typ {
	case protocol.CmdWorkAcceptOffer:
		return &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: s.it.OfferID, ContractRevision: s.num("rev")}
	case protocol.CmdWorkStart:
		return &protocol.StartWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: s.it.Epoch}
	case protocol.CmdLeaseRenew:
		return &protocol.RenewLeasePayload{WorkItemID: "wi-1", OwnershipEpoch: s.it.Epoch, LeaseID: lease}
	case protocol.CmdWorkCheckpoint:
		return &protocol.CheckpointWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: s.it.Epoch, LeaseID: lease}
	case protocol.CmdWorkSubmit:
		return &protocol.SubmitWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: s.it.Epoch, LeaseID: lease}
	case protocol.CmdWorkBlock:
		return &protocol.BlockWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: s.it.Epoch, LeaseID: lease}
	case protocol.CmdWorkFail:
		return &protocol.FailWorkPayload{WorkItemID: "wi-1", OwnershipEpoch: protocol.Uint64(s.it.Epoch), LeaseID: lease}
	case protocol.CmdArtifactPublish:
		return &protocol.PublishArtifactPayload{OwnershipEpoch: protocol.Uint64(s.it.Epoch), LeaseID: lease}
	}
	s.td.Fatalf(s.t, "no payload for %q", typ)
	return nil
}

// cmdType is type= as the files write it: the wire name, or lease.renew
// for the extension command.
func (s *scenario) cmdType() protocol.CommandType {
	if v := s.str("type", ""); v != "lease.renew" {
		return protocol.CommandType(v)
	}
	return protocol.CmdLeaseRenew
}

func (s *scenario) answer() Answered {
	typ := s.cmdType()
	a := Answered{Type: typ, Payload: s.payload(typ), Head: !s.td.HasArg("not-head"), Decided: s.td.HasArg("decided"),
		Stopping: s.td.HasArg("stopping"), MembershipEpoch: 3, Tries: int(s.num("tries")), Tick: time.Second, AgentID: "w1",
		Draining: s.td.HasArg("draining"), Online: !s.td.HasArg("offline")}
	switch code := s.str("err", ""); code {
	case "":
	case "lost":
		a.Err = errors.New("connection lost before the answer")
	case "stale":
		a.Err, a.Stale = errors.New("not sent within its freshness window"), true
	default:
		pe := protocol.Errorf(protocol.Code(code), "refused")
		pe.Details = map[string]any{}
		for _, k := range []string{"pointer", "reason"} {
			if v := s.str(k, ""); v != "" {
				pe.Details[k] = v
			}
		}
		if s.td.HasArg("current-rev") {
			pe.Details["currentRevision"] = float64(s.num("current-rev"))
		}
		a.Err = pe
	}
	return a
}

var ends = map[string]End{"completed": Completed, "preempted": Preempted, "blocked": Blocked, "failed": Failed, "lease-lost": LeaseLost}

func (s *scenario) ended() RunEnded {
	e, ok := ends[s.str("outcome", "")]
	if !ok {
		s.td.Fatalf(s.t, "outcome= is one of completed, preempted, blocked, failed, lease-lost")
	}
	r := RunEnded{End: e, Reason: s.str("reason", ""), AgentID: "w1", Online: !s.td.HasArg("offline"), Draining: s.td.HasArg("draining")}
	if ev := s.str("evidence", ""); ev != "" {
		for _, c := range strings.Split(ev, ",") {
			r.Evidence = append(r.Evidence, protocol.Evidence{Subject: "wi-1", Criteria: protocol.List[string]{c}, Result: protocol.EvidencePass})
		}
	}
	return r
}

func (s *scenario) step(in Input) string {
	next, effs := Step(s.it, in, s.now)
	checkInvariants(s.t, s.it, in, next, effs, s.now)
	s.it = next
	var b strings.Builder
	for _, e := range effs {
		b.WriteString(render(e) + "\n")
	}
	if len(effs) == 0 {
		b.WriteString("(nothing)\n")
	}
	b.WriteString("=> " + s.line(next) + "\n")
	return b.String()
}

// line is the item on one line; zero fields are left out.
func (s *scenario) line(it Item) string {
	f := []string{it.ID, "phase=" + it.Phase.String()}
	if it.Epoch != 0 {
		f = append(f, fmt.Sprintf("epoch=%d", it.Epoch))
	}
	if it.LeaseID != "" {
		f = append(f, "lease="+it.LeaseID)
	}
	if !it.Expires.IsZero() {
		f = append(f, "expires=t0+"+it.Expires.Sub(t0).String())
	}
	flags := map[string]bool{"hold": it.Hold, "lost": it.Lost, "renewing": it.Renewing, "sending": it.Sending, "force-renew": it.ForceRenew}
	var on []string
	for k, v := range flags {
		if v {
			on = append(on, k)
		}
	}
	sort.Strings(on)
	f = append(f, on...)
	if it.Reaccepting != 0 || it.Reaccepted != 0 {
		f = append(f, fmt.Sprintf("reaccepting=%d reaccepted=%d", it.Reaccepting, it.Reaccepted))
	}
	return strings.Join(f, " ")
}

// render prints one effect as the files show it.
func render(e Effect) string {
	switch e := e.(type) {
	case Again:
		s := "again"
		if e.Rebuild {
			s = "again rebuilt"
		}
		s += " why=" + e.Why
		if e.Wait > 0 {
			s += " wait=" + e.Wait.String()
		}
		s += fmt.Sprintf(" tries=%d", e.Tries)
		if e.StaleMembership != 0 {
			s += fmt.Sprintf(" stale-membership=%d", e.StaleMembership)
		}
		return s
	case Send:
		return "send " + string(e.Type) + " " + renderPayload(e.Payload)
	case Refused:
		return "refused " + string(e.Code)
	case Fenced:
		return "fenced " + string(e.Code)
	case Sync:
		if e.IfForgotten {
			return "sync if-forgotten"
		}
		return "sync"
	case EndRun:
		if e.Requeue {
			return "end-run requeue"
		}
		return "end-run finish"
	case RenewAnswered:
		return fmt.Sprintf("renew-answered ok=%t", e.OK)
	case LoseLease:
		return "lose-lease: " + e.Why
	case Track:
		if e.Success {
			return "track success"
		}
		return "track attempt"
	case Outcome:
		if e.Sent == "" {
			return "outcome " + e.End.String()
		}
		return "outcome " + e.End.String() + " sent=" + e.Sent
	case Decided:
		return "decided " + string(e.Type) + ": " + e.Decision
	case RefuseOffer:
		return "refuse-offer " + e.OfferID
	case RenewalRefused:
		return fmt.Sprintf("renewal-refused rev=%d", e.Revision)
	case Withhold:
		return "withhold: " + e.Why
	case StartRun:
		return fmt.Sprintf("start-run attempt=%d", e.Attempt)
	case Renewed:
		return "renewed expires=t0+" + e.Expires.Sub(t0).String()
	}
	name := fmt.Sprintf("%T", e)
	name = strings.TrimPrefix(name, "item.")
	return kebab(name)
}

func renderPayload(p any) string {
	switch p := p.(type) {
	case *protocol.FailWorkPayload:
		return fmt.Sprintf("lease=%s reason=%q evidence=%s", p.LeaseID, p.Reason, criteria(p.Evidence))
	case *protocol.SubmitWorkPayload:
		return fmt.Sprintf("lease=%s evidence=%s", p.LeaseID, criteria(p.Evidence))
	}
	return fmt.Sprintf("%T", p)
}

func criteria(ev protocol.List[protocol.Evidence]) string {
	var out []string
	for _, e := range ev {
		out = append(out, strings.Join(e.Criteria, "+")+":"+string(e.Result))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
