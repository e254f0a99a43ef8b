package item

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// contract is a contract an admission test judges.
func contract(now time.Time) protocol.WorkContract {
	return protocol.WorkContract{
		ContractID: "wc-wi-1", Revision: 1, Goal: "implement wi-1",
		RequiredCapabilities: protocol.List[protocol.Capability]{{ID: "code.implement", Version: "1.x"}},
		Deadline:             protocol.NewTime(now.Add(24 * time.Hour)), Urgency: protocol.UrgencyNormal,
		Budgets: protocol.Budgets{Tokens: protocol.Uint64(1000)}, Risk: protocol.Risk{Class: protocol.RiskLow},
	}
}

func admissionBase() Admission {
	c := contract(t0)
	return Admission{
		Now: t0, AgentID: "w1", Capabilities: []protocol.Capability{{ID: "code.implement", Version: "1.2.0"}},
		Slots: 2, Committed: 0, Capacity: 8, Contract: c, MissionActive: true,
		OfferID: "off-1", OfferedToMe: true, OfferExpires: t0.Add(time.Minute),
		EarliestStart: t0, Estimate: 10 * time.Minute, Confidence: 0.7,
		Reliability: map[string]protocol.ReliabilityRecord{"code.implement": {CapabilityID: "code.implement", Attempts: 4, Successes: 3}},
	}
}

// renewed turns the base input into the renewal of an item w1 owns.
func renewed(edit func(*Admission)) func(*Admission) {
	return func(in *Admission) {
		in.Renewal = true
		in.OfferID, in.OfferedToMe, in.OfferExpires, in.Owner = "", false, time.Time{}, "w1"
		if edit != nil {
			edit(in)
		}
	}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Admission)
		reason protocol.AdmissionReason // "" accepts
	}{
		{"accepts", func(*Admission) {}, ""},
		{"not a candidate", func(in *Admission) { in.OfferedToMe = false }, protocol.RejectAuthorization},
		{"offer expired", func(in *Admission) { in.Now = t0.Add(time.Minute) }, protocol.RejectAuthorization},
		{"mission over", func(in *Admission) { in.MissionActive = false }, protocol.RejectAuthorization},
		{"capability missing", func(in *Admission) {
			in.Contract.RequiredCapabilities = protocol.List[protocol.Capability]{{ID: "code.review", Version: "1.x"}}
		}, protocol.RejectCapability},
		{"capability too old", func(in *Admission) {
			in.Contract.RequiredCapabilities = protocol.List[protocol.Capability]{{ID: "code.implement", Version: "^1.3.0"}}
		}, protocol.RejectCapability},
		{"one of two capabilities", func(in *Admission) {
			in.Contract.RequiredCapabilities = append(in.Contract.RequiredCapabilities, protocol.Capability{ID: "code.review", Version: "1.x"})
		}, protocol.RejectCapability},
		{"no capability named", func(in *Admission) { in.Contract.RequiredCapabilities = nil }, protocol.RejectCapability},
		{"depends on an unknown critical extension", func(in *Admission) { in.UnknownCritical = []string{"urn:example:ext:gpu"} }, protocol.RejectCapability},
		{"full", func(in *Admission) { in.Committed = 8 }, protocol.RejectCapacity},
		{"late", func(in *Admission) { in.EarliestStart = in.Contract.Deadline.Time.Add(-5 * time.Minute) }, protocol.RejectDeadline},
		{"exactly on time", func(in *Admission) { in.EarliestStart = in.Contract.Deadline.Time.Add(-10 * time.Minute) }, ""},
		{"no deadline", func(in *Admission) {
			in.Contract.Deadline = protocol.Time{}
			in.EarliestStart = t0.Add(1000 * time.Hour)
		}, ""},
		{"dependency cancelled", func(in *Admission) {
			in.Dependencies = []Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyVerified, State: protocol.WorkCancelled}}
		}, protocol.RejectDependency},
		{"dependency pending", func(in *Admission) {
			in.Dependencies = []Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyVerified, State: protocol.WorkActive}}
		}, ""},
		{"dependency failed may be offered again", func(in *Admission) {
			in.Dependencies = []Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyVerified, State: protocol.WorkFailed}}
		}, ""},
		{"terminal policy takes cancelled", func(in *Admission) {
			in.Dependencies = []Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyTerminal, State: protocol.WorkCancelled}}
		}, ""},
		{"wall-clock budget below estimate", func(in *Admission) { in.Contract.Budgets.WallClockSeconds = protocol.Float64(60) }, protocol.RejectBudget},
		{"wall-clock budget covers", func(in *Admission) { in.Contract.Budgets.WallClockSeconds = protocol.Float64(600) }, ""},
		// A renewal (spec 10.1) of an owned item: no offer stands, capacity
		// counts it already; the revised contract is judged again.
		{"renewal of an owned item", renewed(nil), ""},
		{"renewal when full", renewed(func(in *Admission) { in.Committed = 8 }), ""},
		{"renewal not the owner", renewed(func(in *Admission) { in.Owner = "w2" }), protocol.RejectAuthorization},
		{"renewal mission over", renewed(func(in *Admission) { in.MissionActive = false }), protocol.RejectAuthorization},
		{"renewal capability missing", renewed(func(in *Admission) {
			in.Contract.RequiredCapabilities = protocol.List[protocol.Capability]{{ID: "code.review", Version: "1.x"}}
		}), protocol.RejectCapability},
		{"renewal dependency cancelled", renewed(func(in *Admission) {
			in.Dependencies = []Dependency{{WorkItemID: "wi-0", Policy: protocol.DependencyVerified, State: protocol.WorkCancelled}}
		}), protocol.RejectDependency},
		{"renewal budget below estimate", renewed(func(in *Admission) { in.Contract.Budgets.WallClockSeconds = protocol.Float64(60) }), protocol.RejectBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := admissionBase()
			tc.edit(&in)
			d := in.Decide()
			if tc.reason == "" {
				if !d.Accepted() {
					t.Fatalf("refused: %+v", d.Rejection)
				}
			} else if d.Accepted() || d.Rejection.Reason != tc.reason || d.Rejection.Detail == "" {
				t.Fatalf("got %+v, want %s", d.Rejection, tc.reason)
			}
			if !d.Accepted() {
				return
			}
			// An acceptance's basis is valid on the wire.
			raw, err := json.Marshal(d.Basis)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := protocol.ValidateDef("selectionBasis", doc); err != nil {
				t.Fatalf("basis %s: %v", raw, err)
			}
		})
	}
}

func TestAdmitBasisContents(t *testing.T) {
	d := admissionBase().Decide()
	b := d.Basis
	if !b.AuthorizationEligible || len(b.CapabilityMatches) != 1 || b.CapabilityMatches[0].Offered != "1.2.0" ||
		len(b.ReliabilityEvidence) != 1 || b.ReliabilityEvidence[0].Successes != 3 ||
		*b.ExpectedCost.WallClockSeconds != 600 || b.AvailabilityEstimate.Confidence != 0.7 {
		t.Fatalf("basis %+v", b)
	}
	if !slices.Equal(b.PolicyRulesApplied, []string{RuleAdmitAuthorization, RuleAdmitCapability, RuleAdmitExtensions, RuleAdmitCapacity,
		RuleAdmitDeadline, RuleAdmitDependency, RuleAdmitBudget, RuleAdmitBudgetLimit}) {
		t.Fatalf("rules %v", b.PolicyRulesApplied)
	}
	// A refusal names the rule that refused last.
	in := admissionBase()
	in.Committed = in.Capacity
	if r := in.Decide().Basis.PolicyRulesApplied; r[len(r)-1] != RuleAdmitCapacity {
		t.Fatalf("rules %v", r)
	}
}

// Every budget dimension of spec 10.3 is judged twice: the contract's
// budget must cover the expected cost, and the worker's limit must cover
// it on top of what accepted items hold. Each refusal names its dimension.
func TestAdmitBudgets(t *testing.T) {
	f, u := protocol.Float64, protocol.Uint64
	// expected is 10 in every dimension but wall-clock (the 600 s estimate).
	expected := protocol.Usage{Money: 10, Tokens: 10, ToolCalls: 10, ComputeSeconds: 10, SideEffects: 10}
	held := protocol.Usage{Money: 5, Tokens: 5, ToolCalls: 5, ComputeSeconds: 5, WallClockSeconds: 5, SideEffects: 5}
	for _, tc := range []struct {
		dim            string
		below, covers  protocol.Budgets // contract budgets
		over, withinIt protocol.Budgets // worker limits, with held
	}{
		{"money", protocol.Budgets{Money: f(9.5)}, protocol.Budgets{Money: f(10)}, protocol.Budgets{Money: f(14)}, protocol.Budgets{Money: f(15)}},
		{"tokens", protocol.Budgets{Tokens: u(9)}, protocol.Budgets{Tokens: u(10)}, protocol.Budgets{Tokens: u(14)}, protocol.Budgets{Tokens: u(15)}},
		{"toolCalls", protocol.Budgets{ToolCalls: u(9)}, protocol.Budgets{ToolCalls: u(10)}, protocol.Budgets{ToolCalls: u(14)}, protocol.Budgets{ToolCalls: u(15)}},
		{"computeSeconds", protocol.Budgets{ComputeSeconds: f(9)}, protocol.Budgets{ComputeSeconds: f(10)}, protocol.Budgets{ComputeSeconds: f(14)}, protocol.Budgets{ComputeSeconds: f(15)}},
		{"wallClockSeconds", protocol.Budgets{WallClockSeconds: f(599)}, protocol.Budgets{WallClockSeconds: f(600)}, protocol.Budgets{WallClockSeconds: f(604)}, protocol.Budgets{WallClockSeconds: f(605)}},
		{"sideEffects", protocol.Budgets{SideEffects: u(9)}, protocol.Budgets{SideEffects: u(10)}, protocol.Budgets{SideEffects: u(14)}, protocol.Budgets{SideEffects: u(15)}},
	} {
		for _, c := range []struct {
			name     string
			contract protocol.Budgets
			limits   protocol.Budgets
			refused  bool
			rule     string
		}{
			{"contract below the expected cost", tc.below, protocol.Budgets{}, true, RuleAdmitBudget},
			{"contract covers it", tc.covers, protocol.Budgets{}, false, ""},
			{"held plus expected over the limit", protocol.Budgets{}, tc.over, true, RuleAdmitBudgetLimit},
			{"held plus expected within the limit", protocol.Budgets{}, tc.withinIt, false, ""},
		} {
			t.Run(tc.dim+"/"+c.name, func(t *testing.T) {
				in := admissionBase()
				in.Contract.Budgets, in.Limits, in.Expected, in.Held = c.contract, c.limits, expected, held
				d := in.Decide()
				if !c.refused {
					if !d.Accepted() {
						t.Fatalf("refused: %+v", d.Rejection)
					}
					if got := UsageOf(d.Basis.ExpectedCost); got != (protocol.Usage{Money: 10, Tokens: 10, ToolCalls: 10, ComputeSeconds: 10, WallClockSeconds: 600, SideEffects: 10}) {
						t.Fatalf("expected cost %+v", got)
					}
					return
				}
				if d.Accepted() || d.Rejection.Reason != protocol.RejectBudget || !strings.HasPrefix(d.Rejection.Detail, tc.dim) {
					t.Fatalf("got %+v, want a budget refusal naming %s", d.Rejection, tc.dim)
				}
				if r := d.Basis.PolicyRulesApplied; r[len(r)-1] != c.rule {
					t.Fatalf("rules %v, want the last %s", r, c.rule)
				}
			})
		}
	}
}

func TestRenewAt(t *testing.T) {
	for _, tc := range []struct {
		name          string
		from, expires time.Duration
		want          time.Duration
	}{
		{"half way", 0, 2 * time.Minute, time.Minute},
		{"after a renewal", 50 * time.Second, 170 * time.Second, 110 * time.Second},
		{"short lease: at least a second ahead", 0, 1500 * time.Millisecond, 500 * time.Millisecond},
		{"under a second left: now", 0, 500 * time.Millisecond, 0},
		{"expired: now", 10 * time.Second, 5 * time.Second, 10 * time.Second},
	} {
		got := RenewAt(t0.Add(tc.from), t0.Add(tc.expires))
		if !got.Equal(t0.Add(tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, got.Sub(t0), tc.want)
		}
	}
}
