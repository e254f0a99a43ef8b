package authoritylite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestCooperationOverrideGrant(t *testing.T) {
	k := newSvc(t)
	k.s.cfg.Policy.MaxOpenWorkItems = 1
	authorize := func(id string) *protocol.AuthorizeWorkPayload {
		c := testContract(id)
		c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
		return &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c}
	}
	k.ok(k.coord, protocol.CmdWorkAuthorize, authorize("wi-1"))
	_, err := k.do(k.coord, protocol.CmdWorkAuthorize, authorize("wi-2"))
	if protocol.CodeOf(err) != protocol.CodeAuthForbidden || group.PolicyOf(err) != PolicyOpenWorkItems {
		t.Fatalf("over the limit: %v", err)
	}
	grant := func(id, action string) *protocol.CooperationOverrideGrant {
		return &protocol.CooperationOverrideGrant{GrantID: id, MissionID: "mis-a", GroupID: "grp-a", Policy: PolicyOpenWorkItems,
			Grantee: agent("coord"), TargetCommandType: protocol.CmdWorkAuthorize, TargetActionID: action, Reason: "second stage needed",
			Approver: owner, GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))}
	}
	// Only the MissionOwner (or a policy service) may grant.
	k.refuse(k.coord, protocol.CmdPolicyGrantCooperationOverride, grant("ovr-0", "act-wi2"), protocol.CodeAuthForbidden)
	k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, grant("ovr-1", "act-wi2"))
	cite := func(action string) func(*protocol.Envelope) {
		return func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = action, "ovr-1" }
	}
	// The grant binds the action id: another action cannot use it.
	k.refuse(k.coord, protocol.CmdWorkAuthorize, authorize("wi-2"), protocol.CodeAuthForbidden, cite("act-other"))
	_, raw, err := k.coord.Build(protocol.CmdWorkAuthorize, "grp-a", authorize("wi-2"), cite("act-wi2"))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := k.s.Submit(context.Background(), "", raw)
	if err != nil {
		t.Fatalf("target command with the grant: %v", err)
	}
	// An idempotent retry returns the earlier events; the grant is spent.
	r2, err := k.s.Submit(context.Background(), "", raw)
	if err != nil || r2.Events[0].EventID != r1.Events[0].EventID {
		t.Fatalf("retry: %v", err)
	}
	k.refuse(k.coord, protocol.CmdWorkAuthorize, authorize("wi-3"), protocol.CodeAuthForbidden, cite("act-wi2b"))
	evs := checkLog(t, k.s, "grp-a")
	consumed := 0
	for _, ev := range evs {
		if ev.Type == protocol.EvtCooperationOverrideConsumed {
			consumed++
			if ev.CausationID != "act-wi2" {
				t.Fatalf("consumption caused by %s", ev.CausationID)
			}
		}
	}
	if consumed != 1 {
		t.Fatalf("%d consumption events, want 1", consumed)
	}
	// Durable: after reopen the grant is still consumed.
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	k.s.cfg.Policy.MaxOpenWorkItems = 1
	k.coord.s = k.s
	k.refuse(k.coord, protocol.CmdWorkAuthorize, authorize("wi-4"), protocol.CodeAuthForbidden, cite("act-wi4"))
}

func TestRateLimitNamesPolicy(t *testing.T) {
	k := newSvc(t)
	k.s.rates = &rateLimiter{Burst: 2, Every: time.Minute}
	post := func(id string) error {
		_, err := k.do(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"})
		return err
	}
	if post("a") != nil || post("b") != nil {
		t.Fatal("within burst refused")
	}
	err := post("c")
	if protocol.CodeOf(err) != protocol.CodeRateLimited || group.PolicyOf(err) != PolicyMessageRate {
		t.Fatalf("third message: %v", err)
	}
	k.clk.Advance(time.Minute)
	if err := post("d"); err != nil {
		t.Fatalf("after refill: %v", err)
	}
}

// Messages and proposals have buckets of their own (spec 20 names two
// limits): an agent that used up its messages can still propose, and one
// out of proposals can still post; each refusal names its policy.
func TestMessageAndProposalRatesApart(t *testing.T) {
	k := newSvc(t)
	k.s.rates = &rateLimiter{Burst: 1, Every: time.Hour}
	k.s.proposals = &rateLimiter{Burst: 1, Every: time.Hour}
	post := func(id string) error {
		_, err := k.do(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"})
		return err
	}
	propose := func(id string) error {
		_, err := k.do(k.w["w1"], protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: id, MissionID: "mis-a", Summary: "more"})
		return err
	}
	if err := post("m1"); err != nil {
		t.Fatal(err)
	}
	if err := post("m2"); protocol.CodeOf(err) != protocol.CodeRateLimited || group.PolicyOf(err) != PolicyMessageRate {
		t.Fatalf("second message: %v", err)
	}
	if err := propose("p1"); err != nil {
		t.Fatalf("a proposal after the messages ran out: %v", err)
	}
	if err := propose("p2"); protocol.CodeOf(err) != protocol.CodeRateLimited || group.PolicyOf(err) != PolicyProposalRate {
		t.Fatalf("second proposal: %v", err)
	}
}

// One human creating Groups in a loop is refused with RATE_LIMITED and the
// wait; a byte-identical retry of an accepted create still gets its receipt.
func TestMissionCreateRateLimited(t *testing.T) {
	k := newSvc(t)
	k.s.creates = &rateLimiter{Burst: 2, Every: time.Minute}
	create := func(group string) (*protocol.Command, []byte) {
		cmd, raw, err := k.alice.Build(protocol.CmdMissionCreate, group, &protocol.CreateMissionPayload{MissionID: "mis-" + group, Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
		if err != nil {
			t.Fatal(err)
		}
		return cmd, raw
	}
	ctx := context.Background()
	_, b := create("grp-b")
	if _, err := k.s.Submit(ctx, "", b); err != nil {
		t.Fatal(err)
	}
	_, c := create("grp-c")
	if _, err := k.s.Submit(ctx, "", c); err != nil {
		t.Fatal(err)
	}
	_, d := create("grp-d")
	_, err := k.s.Submit(ctx, "", d)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeRateLimited || !pe.Retryable || group.PolicyOf(err) != PolicyMissionCreateRate || fmt.Sprint(pe.Details["retryAfterMs"]) != "60000" {
		t.Fatalf("third create: %v %+v", err, pe)
	}
	if k.s.group("grp-d") != nil {
		t.Fatal("the refused create made a Group")
	}
	if rc, err := k.s.Submit(ctx, "", b); err != nil || rc == nil {
		t.Fatalf("retry of an accepted create: %v", err)
	}
	k.clk.Advance(time.Minute)
	_, d = create("grp-d")
	if _, err := k.s.Submit(ctx, "", d); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
}
