package group

import (
	"errors"
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// The "coordinator or policy" sender column: an Organization service is
// admitted without a coordinator lease, an agent only as the coordinator.
func TestCoordinatorOrPolicySender(t *testing.T) {
	terminate := &protocol.TerminateMissionPayload{MissionID: "mis-a", Reason: "budget spent"}
	policy := protocol.Actor{Kind: protocol.ActorService, ID: "policy-1"}
	for _, tc := range []struct {
		name string
		in   func(k *kit) Input
		code protocol.Code // "" accepted
	}{
		{"an agent that is not the coordinator, on the coordinator's epoch", func(k *kit) Input {
			in := k.worker("w1", protocol.CmdMissionTerminate, terminate)
			in.CoordinatorEpoch = protocol.Uint64(k.epoch)
			return in
		}, protocol.CodeAuthForbidden},
		{"a policy service", func(k *kit) Input { return k.input(policy, protocol.CmdMissionTerminate, terminate) }, ""},
		{"the coordinator", func(k *kit) Input { return k.coordIn(protocol.CmdMissionTerminate, terminate) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			if tc.code == "" {
				k.must(tc.in(k))
				return
			}
			k.refuse(tc.in(k), tc.code)
		})
	}
}

// work.fail without a lease is the coordinator's or a policy service's;
// a worker fails only what it owns.
func TestFailWithoutLeaseSender(t *testing.T) {
	fail := &protocol.FailWorkPayload{WorkItemID: "wi", Reason: "cannot be done", Evidence: failureEv}
	for _, tc := range []struct {
		name string
		in   func(k *kit) Input
		code protocol.Code // "" accepted
	}{
		{"a worker, on the coordinator's epoch", func(k *kit) Input {
			in := k.worker("w1", protocol.CmdWorkFail, fail)
			in.CoordinatorEpoch = protocol.Uint64(k.epoch)
			return in
		}, protocol.CodeAuthForbidden},
		{"a policy service", func(k *kit) Input {
			return k.input(protocol.Actor{Kind: protocol.ActorService, ID: "policy-1"}, protocol.CmdWorkFail, fail)
		}, ""},
		{"the coordinator", func(k *kit) Input { return k.coordIn(protocol.CmdWorkFail, fail) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			k.to("wi", protocol.WorkQueued)
			if tc.code == "" {
				k.must(tc.in(k))
				k.wantState("wi", protocol.WorkFailed)
				return
			}
			k.refuse(tc.in(k), tc.code)
		})
	}
}

// Client-supplied durations: 1 ms up to maxDurationMs inclusive.
func TestDurationBounds(t *testing.T) {
	for _, tc := range []struct {
		ms uint64
		ok bool
	}{{0, false}, {1, true}, {maxDurationMs, true}, {maxDurationMs + 1, false}} {
		_, err := durationMs(tc.ms, "/payload/x")
		if (err == nil) != tc.ok || (err != nil && protocol.CodeOf(err) != protocol.CodeInvalidCommand) {
			t.Errorf("durationMs(%d): %v, want ok %v", tc.ms, err, tc.ok)
		}
	}
}

// A contract's first revision is 1; it names at least one output and one
// capability, allows at least one attempt and a backoff that does not shrink.
func TestCheckContractMinimums(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *protocol.WorkContract)
		ok   bool
	}{
		{"as built", func(*protocol.WorkContract) {}, true},
		{"revision 1", func(c *protocol.WorkContract) { c.Revision = 1 }, true},
		{"revision 0", func(c *protocol.WorkContract) { c.Revision = 0 }, false},
		{"no required outputs", func(c *protocol.WorkContract) { c.RequiredOutputs = nil }, false},
		{"no required capabilities", func(c *protocol.WorkContract) { c.RequiredCapabilities = nil }, false},
		{"one attempt, backoff multiplier 1", func(c *protocol.WorkContract) { c.RetryPolicy.MaxAttempts, c.RetryPolicy.Backoff.Multiplier = 1, 1 }, true},
		{"no attempts", func(c *protocol.WorkContract) { c.RetryPolicy.MaxAttempts = 0 }, false},
		{"a backoff that shrinks", func(c *protocol.WorkContract) { c.RetryPolicy.Backoff.Multiplier = 0.5 }, false},
	} {
		c := testContract("wi")
		tc.edit(&c)
		if err := CheckContract(&c); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A refusal for missing evidence names the criteria: those left uncovered
// and those the contract does not have.
func TestEvidenceCoverageNamesCriteria(t *testing.T) {
	c := testContract("wi")
	for _, tc := range []struct {
		name               string
		ev                 []protocol.Evidence
		uncovered, unknown []string
	}{
		{"all covered", []protocol.Evidence{evidence("wi", "ac-1", "ac-2")}, nil, nil},
		{"one uncovered", []protocol.Evidence{evidence("wi", "ac-1")}, []string{"ac-2"}, []string{}},
		{"one unknown", []protocol.Evidence{evidence("wi", "ac-1", "ac-2", "ac-9")}, []string{}, []string{"ac-9"}},
	} {
		err := checkEvidenceCoverage(&c, tc.ev)
		if tc.uncovered == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || !reflect.DeepEqual(pe.Details["uncoveredCriteria"], tc.uncovered) || !reflect.DeepEqual(pe.Details["unknownCriteria"], tc.unknown) {
			t.Errorf("%s: %v, details %v", tc.name, err, pe)
		}
	}
}

// DependenciesMet lists what a WorkItem still waits for; nothing for an
// unknown WorkItem.
func TestDependenciesMet(t *testing.T) {
	k := newKit(t)
	k.authorize("a")
	k.authorize("b", protocol.Dependency{WorkItemID: "a", Policy: protocol.DependencyVerified})
	if got := k.g.DependenciesMet("b"); len(got) != 1 || got[0].WorkItemID != "a" {
		t.Fatalf("b waits for %v, want a", got)
	}
	if got := k.g.DependenciesMet("a"); len(got) != 0 {
		t.Fatalf("a waits for %v", got)
	}
	if got := k.g.DependenciesMet("nope"); got != nil {
		t.Fatalf("unknown item waits for %v", got)
	}
}

// work.propose may name a parent WorkItem only if it exists.
func TestProposeParent(t *testing.T) {
	for _, tc := range []struct {
		parent string
		ok     bool
	}{{"wi", true}, {"wi-x", false}, {"", true}} {
		k := newKit(t)
		k.authorize("wi")
		in := k.worker("w1", protocol.CmdWorkPropose, &protocol.ProposeWorkPayload{ProposalID: "p1", MissionID: "mis-a", Summary: "split", ParentWorkItemID: tc.parent})
		if tc.ok {
			k.must(in)
			continue
		}
		if e := k.refuse(in, protocol.CodeInvalidCommand); e.Pointer != "/payload/parentWorkItemId" {
			t.Errorf("parent %q: refused at %q", tc.parent, e.Pointer)
		}
	}
}

// Offering a WorkItem with an active owner is refused, naming the owner's
// ownership epoch.
func TestOfferWithActiveOwner(t *testing.T) {
	k := newKit(t)
	k.to("wi", protocol.WorkQueued)
	e := k.refuse(k.coordIn(protocol.CmdWorkOffer, k.offerPayload("wi", "of-2", "w2")), protocol.CodeInvalidStateTransition)
	if e.Details["reason"] != "active_owner" || e.Details["ownershipEpoch"] != k.g.Items["wi"].Ownership.OwnershipEpoch {
		t.Fatalf("details %v", e.Details)
	}
}
