package authoritylite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// policyContract is toActive's contract with the given goal.
func (k *svc) policyContract(id, goal string) protocol.WorkContract {
	c := testContract(id)
	if goal != "" {
		c.Goal = goal
	}
	c.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
	c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
	cpu := 1.0
	c.ResourceLimits = protocol.ResourceLimits{CPU: &cpu, MemoryMiB: protocol.Uint64(512)}
	return c
}

func (k *svc) authorizeGoal(id, goal string) error {
	_, err := k.do(k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: k.policyContract(id, goal)})
	return err
}

func (k *svc) offerTo(id string) {
	k.t.Helper()
	k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: k.item(id).Contract,
		Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w1", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
}

func (k *svc) accept(id string) error {
	_, err := k.do(k.w["w1"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
	return err
}

func (k *svc) start(id string) error {
	_, err := k.do(k.w["w1"], protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: k.item(id).Ownership.OwnershipEpoch})
	return err
}

func (k *svc) block(id string, kind protocol.ResolutionKind) error {
	w := k.item(id)
	_, err := k.do(k.w["w1"], protocol.CmdWorkBlock, &protocol.BlockWorkPayload{WorkItemID: id, OwnershipEpoch: w.Ownership.OwnershipEpoch, LeaseID: w.Lease.LeaseID,
		CheckpointID: "cp-" + id, StateDigest: protocol.Digest([]byte(id)), Resolution: protocol.Resolution{Kind: kind, Detail: "which branch?"}})
	return err
}

// must fails the test on a refusal of a setup step.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// softNotices decodes the authority's policy notices in the Group's log.
func softNotices(t *testing.T, k *svc) []SoftLimitNotice {
	t.Helper()
	var out []SoftLimitNotice
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type != protocol.EvtMessagePosted {
			continue
		}
		var m struct {
			ConversationID string         `json:"conversationId"`
			Author         protocol.Actor `json:"author"`
			Text           string         `json:"text"`
		}
		if err := json.Unmarshal(ev.Payload, &m); err != nil {
			t.Fatal(err)
		}
		if m.ConversationID != PolicyConversation {
			continue
		}
		var n SoftLimitNotice
		if err := json.Unmarshal([]byte(m.Text), &n); err != nil {
			t.Fatalf("policy notice text %q: %v", m.Text, err)
		}
		out = append(out, n)
	}
	return out
}

// Every counted limit of spec 20: with a limit of 2, the command that
// brings the count to the soft threshold (0.8 × 2 → 2) tells the Group,
// the one past the limit is refused with the policy named, and the item it
// was about keeps its state (nothing accepted is dropped).
func TestCountedPolicyLimits(t *testing.T) {
	for _, tc := range []struct {
		policy string
		set    func(*Policy)
		// raise runs the i-th command that raises the count (after its setup).
		raise func(k *svc, i int) error
		// kept is the state the refused item keeps.
		kept protocol.WorkItemState
		// other, if set, is a command of the same type the limit does not count.
		other func(k *svc) error
	}{
		{PolicyOpenWorkItems, func(p *Policy) { p.MaxOpenWorkItems = 2 },
			func(k *svc, i int) error { return k.authorizeGoal(itemID(i), "") }, "", nil},
		{PolicyDuplicateWork, func(p *Policy) { p.MaxDuplicateWorkItems = 2 },
			func(k *svc, i int) error { return k.authorizeGoal(itemID(i), "the same work") }, "",
			func(k *svc) error { return k.authorizeGoal("wi-other", "other work") }},
		{PolicyQueuedWorkItems, func(p *Policy) { p.MaxQueuedWorkItems = 2 },
			func(k *svc, i int) error {
				must(k.t.(*testing.T), k.authorizeGoal(itemID(i), ""))
				k.offerTo(itemID(i))
				return k.accept(itemID(i))
			}, protocol.WorkOffered, nil},
		{PolicyActiveWorkItems, func(p *Policy) { p.MaxActiveWorkItems = 2 },
			func(k *svc, i int) error {
				must(k.t.(*testing.T), k.authorizeGoal(itemID(i), ""))
				k.offerTo(itemID(i))
				must(k.t.(*testing.T), k.accept(itemID(i)))
				return k.start(itemID(i))
			}, protocol.WorkQueued, nil},
		{PolicyClarifications, func(p *Policy) { p.MaxOpenClarifications = 2 },
			func(k *svc, i int) error {
				must(k.t.(*testing.T), k.authorizeGoal(itemID(i), ""))
				k.offerTo(itemID(i))
				must(k.t.(*testing.T), k.accept(itemID(i)))
				must(k.t.(*testing.T), k.start(itemID(i)))
				return k.block(itemID(i), protocol.ResolutionClarification)
			}, protocol.WorkActive,
			func(k *svc) error {
				must(k.t.(*testing.T), k.authorizeGoal("wi-other", ""))
				k.offerTo("wi-other")
				must(k.t.(*testing.T), k.accept("wi-other"))
				must(k.t.(*testing.T), k.start("wi-other"))
				return k.block("wi-other", protocol.ResolutionDependency)
			}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			k := newSvc(t)
			tc.set(&k.s.cfg.Policy)
			must(t, tc.raise(k, 1))
			if n := softNotices(t, k); len(n) != 0 {
				t.Fatalf("notices below the soft threshold: %+v", n)
			}
			must(t, tc.raise(k, 2))
			n := softNotices(t, k)
			if len(n) != 1 || n[0].Policy != tc.policy || n[0].Count != 2 || n[0].SoftLimit != 2 || n[0].Limit != 2 || n[0].Actor.ID == "" {
				t.Fatalf("notices at the soft threshold: %+v", n)
			}
			err := tc.raise(k, 3)
			if protocol.CodeOf(err) != protocol.CodeAuthForbidden || group.PolicyOf(err) != tc.policy {
				t.Fatalf("past the limit: %v, want AUTH_FORBIDDEN naming %s", err, tc.policy)
			}
			if tc.kept != "" {
				if s := k.item(itemID(3)).State; s != tc.kept {
					t.Fatalf("the refused item is %s, want it kept %s", s, tc.kept)
				}
			}
			if tc.other != nil {
				must(t, tc.other(k))
			}
			if n := softNotices(t, k); len(n) != 1 {
				t.Fatalf("%d notices, want the one", len(n))
			}
		})
	}
}

func itemID(i int) string { return "wi-" + string(rune('0'+i)) }

// A cooperation-override grant lifts each new counted limit once, and a
// negative SoftLimit tells nothing.
func TestCountedPolicyGrantAndQuiet(t *testing.T) {
	k := newSvc(t)
	k.s.cfg.Policy.MaxQueuedWorkItems, k.s.cfg.Policy.SoftLimit = 1, -1
	must(t, k.authorizeGoal("wi-1", ""))
	k.offerTo("wi-1")
	must(t, k.accept("wi-1"))
	must(t, k.authorizeGoal("wi-2", ""))
	k.offerTo("wi-2")
	if err := k.accept("wi-2"); group.PolicyOf(err) != PolicyQueuedWorkItems {
		t.Fatalf("over the limit: %v", err)
	}
	k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &protocol.CooperationOverrideGrant{GrantID: "ovr-q", MissionID: "mis-a", GroupID: "grp-a",
		Policy: PolicyQueuedWorkItems, Grantee: agent("w1"), TargetCommandType: protocol.CmdWorkAcceptOffer, TargetActionID: "act-accept-2",
		Reason: "a second queued item is needed", Approver: owner, GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))})
	k.ok(k.w["w1"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-2", OfferID: "off-wi-2", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())},
		func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = "act-accept-2", "ovr-q" })
	if s := k.item("wi-2").State; s != protocol.WorkQueued {
		t.Fatalf("wi-2 is %s after the grant", s)
	}
	if n := softNotices(t, k); len(n) != 0 {
		t.Fatalf("notices with SoftLimit < 0: %+v", n)
	}
}

func TestDecompositionKey(t *testing.T) {
	base := testContract("wi-1")
	base.Goal = "build it"
	base.RequiredCapabilities = protocol.List[protocol.Capability]{{ID: "a", Version: "1.x"}, {ID: "b", Version: "2.x"}}
	base.Inputs = protocol.List[protocol.InputRef]{{Artifact: "sha256:1"}, {Artifact: "sha256:2"}}
	same := base
	same.ContractID, same.Deadline = "other", protocol.NewTime(t0.Add(time.Hour))
	same.RequiredCapabilities = protocol.List[protocol.Capability]{base.RequiredCapabilities[1], base.RequiredCapabilities[0]}
	same.Inputs = protocol.List[protocol.InputRef]{base.Inputs[1], base.Inputs[0]}
	if decompositionKey(same) != decompositionKey(base) {
		t.Fatal("order or ids changed the key")
	}
	for name, edit := range map[string]func(*protocol.WorkContract){
		"goal":       func(c *protocol.WorkContract) { c.Goal = "build it twice" },
		"capability": func(c *protocol.WorkContract) { c.RequiredCapabilities = c.RequiredCapabilities[:1] },
		"version": func(c *protocol.WorkContract) {
			c.RequiredCapabilities = protocol.List[protocol.Capability]{{ID: "a", Version: "2.x"}, {ID: "b", Version: "2.x"}}
		},
		"inputs": func(c *protocol.WorkContract) { c.Inputs = c.Inputs[:1] },
	} {
		c := base
		edit(&c)
		if decompositionKey(c) == decompositionKey(base) {
			t.Errorf("a different %s gave the same key", name)
		}
	}
}

// A command that brings one limit to its soft threshold is still held to
// every other: here the fourth duplicate reaches the open-items notice
// (⌈0.8 × 5⌉ = 4) and is refused by the duplicate limit (3).
func TestCountedPolicyAllLimitsChecked(t *testing.T) {
	k := newSvc(t)
	k.s.cfg.Policy.MaxOpenWorkItems, k.s.cfg.Policy.MaxDuplicateWorkItems = 5, 3
	for i := 1; i <= 3; i++ {
		must(t, k.authorizeGoal(itemID(i), "the same work"))
	}
	err := k.authorizeGoal(itemID(4), "the same work")
	if protocol.CodeOf(err) != protocol.CodeAuthForbidden || group.PolicyOf(err) != PolicyDuplicateWork {
		t.Fatalf("fourth duplicate: %v, want AUTH_FORBIDDEN naming %s", err, PolicyDuplicateWork)
	}
	must(t, k.authorizeGoal(itemID(4), "other work"))
	if n := softNotices(t, k); len(n) != 2 || n[0].Policy != PolicyDuplicateWork || n[1].Policy != PolicyOpenWorkItems {
		t.Fatalf("notices %+v, want the duplicate one (third) and the open one (fourth item)", n)
	}
}
