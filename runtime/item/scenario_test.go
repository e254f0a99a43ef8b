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
		in := Due{Type: s.cmdType(), Payload: s.payload(s.cmdType()), Online: !td.HasArg("offline"), Membership: 3,
			Cursor: s.num("cursor"), Conflicted: td.HasArg("conflicted")}
		if td.HasArg("membership") {
			in.Membership = s.num("membership")
		}
		if td.HasArg("expires") {
			in.Expires = s.now.Add(s.dur("expires"))
		}
		if td.HasArg("retry-in") {
			in.RetryAt = s.now.Add(s.dur("retry-in"))
		}
		return s.step(in)
	case "offered":
		return s.step(s.offered())
	case "renewal":
		return s.step(Renewal{Admission: s.admission(), Revision: s.num("rev"), OfferID: "of-1", AgentID: "w1",
			Disclosure: protocol.ScheduleDisclosure{ComputedAt: protocol.NewTime(s.now)}})
	case "picked":
		return s.step(Picked{Adoptable: td.HasArg("adoptable"), Resume: s.str("resume", "")})
	case "tick":
		return s.step(s.tick())
	case "preempt":
		return s.step(PreemptAsked{Why: s.str("why", "scheduler"), For: s.str("for", ""), ByPool: td.HasArg("by-pool")})
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
		ContractRevision: s.num("rev"), AcceptedRevision: s.num("accepted"), Judged: s.td.HasArg("judged"),
		RenewalRefused: s.td.HasArg("renewal-refused")}
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
		Reaccepting: s.num("reaccepting"), Reaccepted: s.num("reaccepted"), Hold: s.td.HasArg("hold"),
		Renewing: s.td.HasArg("renewing"), Preempting: s.td.HasArg("preempting"), ForceRenew: s.td.HasArg("force-renew"),
		StaleMembership: s.num("stale-membership"), AwaitSeq: s.num("await"), AskedFor: s.str("asked-for", "")}
	if s.td.HasArg("expires") {
		it.Expires = s.now.Add(s.dur("expires"))
	}
	if it.Phase == Running {
		it.RenewedAt = s.now
	}
	if s.td.HasArg("asked") {
		it.AskedAt = s.now
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
	if !it.RenewedAt.IsZero() && !it.RenewedAt.Equal(t0) {
		f = append(f, "renewed=t0+"+it.RenewedAt.Sub(t0).String())
	}
	if !it.RetryAt.IsZero() {
		f = append(f, "retry=t0+"+it.RetryAt.Sub(t0).String())
	}
	if !it.AskedAt.IsZero() {
		f = append(f, "asked=t0+"+it.AskedAt.Sub(t0).String()+" for="+it.AskedFor)
	}
	if it.StaleMembership != 0 {
		f = append(f, fmt.Sprintf("stale-membership=%d", it.StaleMembership))
	}
	if it.AwaitSeq != 0 {
		f = append(f, fmt.Sprintf("await=%d", it.AwaitSeq))
	}
	if it.Cost != (protocol.Usage{}) {
		f = append(f, "cost="+usage(it.Cost))
	}
	flags := map[string]bool{"hold": it.Hold, "lost": it.Lost, "renewing": it.Renewing, "sending": it.Sending, "force-renew": it.ForceRenew,
		"preempting": it.Preempting}
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
	return renderMore(e)
}

// renderMore prints the effects of admission, picks and the clock.
func renderMore(e Effect) string {
	switch e := e.(type) {
	case Admitted:
		if e.Decision.Accepted() {
			return "admitted: accepted"
		}
		r := e.Decision.Basis.PolicyRulesApplied
		return "admitted: refused by " + r[len(r)-1]
	case Declined:
		return fmt.Sprintf("declined %s: %s", e.Rejection.Reason, e.Rejection.Detail)
	case Ambiguous:
		return "ambiguous: " + strings.Join(e.Questions, "; ")
	case Wait:
		return "wait: " + e.Why
	case Preempt:
		s := "preempt why=" + e.Why
		if e.For != "" {
			s += " for=" + e.For
		}
		if e.ByPool {
			s += " by-pool"
		}
		return s
	case RefusePreemption:
		return fmt.Sprintf("refuse-preemption for=%s waited=%s", e.For, e.Waited)
	case ExtendSlot:
		return "extend-slot until=t0+" + e.Until.Sub(t0).String()
	case BufferRenewal:
		return "buffer-renewal lease=" + e.Payload.LeaseID
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
	case *protocol.AcceptOfferPayload:
		return fmt.Sprintf("offer=%s rev=%d", p.OfferID, p.ContractRevision)
	case *protocol.StartWorkPayload:
		return fmt.Sprintf("epoch=%d resume=%q", p.OwnershipEpoch, p.ResumeFromCheckpointID)
	case *protocol.RenewLeasePayload:
		return "lease=" + p.LeaseID
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

// dims are the six budget dimensions as the files name them.
var dims = []string{"money", "tokens", "toolCalls", "computeSeconds", "wallClockSeconds", "sideEffects"}

// usageArg reads prefix.DIM=V for every dimension into a usage.
func (s *scenario) usageArg(prefix string) (protocol.Usage, bool) {
	var u protocol.Usage
	set := false
	for _, d := range dims {
		a, ok := s.td.Arg(prefix + "." + d)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(a.Vals[0], 64)
		if err != nil {
			s.td.Fatalf(s.t, "%s.%s: %v", prefix, d, err)
		}
		set = true
		switch d {
		case "money":
			u.Money = v
		case "tokens":
			u.Tokens = uint64(v)
		case "toolCalls":
			u.ToolCalls = uint64(v)
		case "computeSeconds":
			u.ComputeSeconds = v
		case "wallClockSeconds":
			u.WallClockSeconds = v
		case "sideEffects":
			u.SideEffects = uint64(v)
		}
	}
	return u, set
}

// budgetsArg reads prefix.DIM=V as budgets: only the dimensions named.
func (s *scenario) budgetsArg(prefix string) protocol.Budgets {
	u, _ := s.usageArg(prefix)
	var b protocol.Budgets
	for _, d := range dims {
		if !s.td.HasArg(prefix + "." + d) {
			continue
		}
		switch d {
		case "money":
			b.Money = protocol.Float64(u.Money)
		case "tokens":
			b.Tokens = protocol.Uint64(u.Tokens)
		case "toolCalls":
			b.ToolCalls = protocol.Uint64(u.ToolCalls)
		case "computeSeconds":
			b.ComputeSeconds = protocol.Float64(u.ComputeSeconds)
		case "wallClockSeconds":
			b.WallClockSeconds = protocol.Float64(u.WallClockSeconds)
		case "sideEffects":
			b.SideEffects = protocol.Uint64(u.SideEffects)
		}
	}
	return b
}

// admission is what admission judges, from the directive's arguments:
// by default w1 (code.implement 1.2.0, 2 slots, capacity 8) is offered
// wi-1 (code.implement 1.x, no deadline, no budget) under offer of-1,
// estimated at 10 minutes, nothing held, no limits.
func (s *scenario) admission() Admission {
	c := protocol.WorkContract{ContractID: "wc-1", Revision: 1,
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: s.str("need", "1.x")}},
		Budgets:              s.budgetsArg("budget")}
	if s.td.HasArg("deadline") {
		c.Deadline = protocol.NewTime(s.now.Add(s.dur("deadline")))
	}
	a := Admission{Now: s.now, AgentID: "w1", Capabilities: []protocol.Capability{{ID: "code.implement", Version: s.str("have", "1.2.0")}},
		Slots: 2, Committed: int(s.num("committed")), Capacity: 8, Owner: "w1", OfferID: "of-1", OfferedToMe: !s.td.HasArg("not-candidate"),
		Contract: c, MissionActive: !s.td.HasArg("mission-over"), EarliestStart: s.now, Estimate: 10 * time.Minute, Confidence: 0.5,
		Limits: s.budgetsArg("limit")}
	if s.td.HasArg("capacity") {
		a.Capacity = int(s.num("capacity"))
	}
	if s.td.HasArg("estimate") {
		a.Estimate = s.dur("estimate")
	}
	if s.td.HasArg("start-in") {
		a.EarliestStart = s.now.Add(s.dur("start-in"))
	}
	if s.td.HasArg("offer-expires") {
		a.OfferExpires = s.now.Add(s.dur("offer-expires"))
	}
	if s.td.HasArg("not-owner") {
		a.Owner = "w2"
	}
	if v := s.str("unknown-critical", ""); v != "" {
		a.UnknownCritical = strings.Split(v, ",")
	}
	if v := s.str("dep", ""); v != "" { // state:policy
		st, pol, _ := strings.Cut(v, ":")
		a.Dependencies = []Dependency{{WorkItemID: "wi-0", State: protocol.WorkItemState(st), Policy: protocol.DependencyPolicy(pol)}}
	}
	a.Expected, _ = s.usageArg("cost")
	a.Held, _ = s.usageArg("held")
	return a
}

func (s *scenario) offered() Offered {
	o := Offered{Admission: s.admission(), ContractRevision: 1, AskFailed: s.td.HasArg("ask-failed"),
		Disclosure: protocol.ScheduleDisclosure{ComputedAt: protocol.NewTime(s.now)}}
	if v := s.str("questions", ""); v != "" {
		o.Questions = strings.Split(v, ",")
	}
	return o
}

func (s *scenario) tick() Ticked {
	t := Ticked{Conn: Online, Tick: time.Second, PreemptTimeout: 30 * time.Second, Victim: s.td.HasArg("victim")}
	switch {
	case s.td.HasArg("offline"):
		t.Conn = Offline
	case s.td.HasArg("reconciling"):
		t.Conn = Reconciling
	}
	if s.td.HasArg("grace") {
		t.Grace = s.now.Add(s.dur("grace"))
	}
	return t
}

// usage is a usage on one line, its non-zero dimensions only.
func usage(u protocol.Usage) string {
	var f []string
	for _, d := range []struct {
		name string
		v    float64
	}{{"money", u.Money}, {"tokens", float64(u.Tokens)}, {"toolCalls", float64(u.ToolCalls)}, {"computeSeconds", u.ComputeSeconds},
		{"wallClockSeconds", u.WallClockSeconds}, {"sideEffects", float64(u.SideEffects)}} {
		if d.v != 0 {
			f = append(f, fmt.Sprintf("%s:%g", d.name, d.v))
		}
	}
	return strings.Join(f, ",")
}
