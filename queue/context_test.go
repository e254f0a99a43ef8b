package queue

import (
	"encoding/json"
	"testing"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// contextEvent appends a context_published for a package of the stream's
// Mission, scoped to workItemID ("" Mission-wide) unless edit changes it.
func (s *stream) contextEvent(id, workItemID string, version uint64, edit func(*protocol.ContextPackage)) {
	p := protocol.ContextPackage{PackageID: id, Version: version,
		Scope:        protocol.ContextScope{MissionID: "mis-" + s.group, GroupID: s.group, WorkItemID: workItemID},
		SourceEvents: protocol.EventRange{GroupID: s.group, FromSequence: 1, ToSequence: s.seq},
		Artifacts:    protocol.List[string]{}, Decisions: protocol.List[protocol.Decision]{}, Constraints: protocol.List[string]{"v" + string(rune('0'+version))},
		OpenQuestions: protocol.List[string]{}, Generator: protocol.Generator{AgentID: "coord-1", AgentVersion: "1"}, GeneratedAt: protocol.NewTime(t0)}
	if edit != nil {
		edit(&p)
	}
	s.add(protocol.EvtContextPublished, protocol.AggregateContext, id, "coord-1", group.ContextPublished{Package: p, Digest: protocol.Digest([]byte(id))})
}

func TestContextPackageForItem(t *testing.T) {
	cases := []struct {
		name   string
		events func(s *stream)
		item   string
		want   string // the constraint naming the version given, "" none
	}{
		{"none", func(*stream) {}, "wi-1", ""},
		{"the item's", func(s *stream) { s.contextEvent("ctx-wi-1", "wi-1", 1, nil) }, "wi-1", "v1"},
		{"the newest version", func(s *stream) {
			s.contextEvent("ctx-wi-1", "wi-1", 1, nil)
			s.contextEvent("ctx-wi-1", "wi-1", 2, nil)
		}, "wi-1", "v2"},
		{"Mission-wide when the item has none", func(s *stream) { s.contextEvent("ctx-mis", "", 3, nil) }, "wi-1", "v3"},
		{"the item's before the Mission's", func(s *stream) {
			s.contextEvent("ctx-wi-1", "wi-1", 1, nil)
			s.contextEvent("ctx-mis", "", 3, nil)
		}, "wi-1", "v1"},
		{"another item's is not given", func(s *stream) { s.contextEvent("ctx-wi-2", "wi-2", 1, nil) }, "wi-1", ""},
		{"another Mission's is not given", func(s *stream) {
			s.contextEvent("ctx-x", "wi-1", 1, func(p *protocol.ContextPackage) { p.Scope.MissionID = "mis-other" })
		}, "wi-1", ""},
		{"another Group's is not given", func(s *stream) {
			s.contextEvent("ctx-x", "", 1, func(p *protocol.ContextPackage) { p.Scope.GroupID = "grp-other" })
		}, "wi-1", ""},
		{"one citing another Group's events is not given", func(s *stream) {
			s.contextEvent("ctx-x", "wi-1", 1, func(p *protocol.ContextPackage) { p.SourceEvents.GroupID = "grp-other" })
		}, "wi-1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t, t.TempDir(), Options{})
			s := newStream("grp-a")
			s.missionCreated()
			s.authorized("wi-1", testContract(1, protocol.UrgencyNormal, false))
			s.authorized("wi-2", testContract(1, protocol.UrgencyNormal, false))
			tc.events(s)
			mustApply(t, st, s.evs...)
			p, ok, err := st.ContextPackage("grp-a", tc.item)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if ok {
				got = p.Constraints[0]
			}
			if got != tc.want {
				t.Fatalf("package %q, want %q", got, tc.want)
			}
			// The projection is rebuilt by replay to the same answer.
			if err := st.Rebuild(); err != nil {
				t.Fatal(err)
			}
			if p2, ok2, _ := st.ContextPackage("grp-a", tc.item); ok2 != ok || (ok && p2.Constraints[0] != got) {
				t.Fatalf("after rebuild %v %v, want %v %q", p2.Constraints, ok2, ok, got)
			}
		})
	}
}

func TestCitedEvents(t *testing.T) {
	st := openTest(t, t.TempDir(), Options{})
	s := newStream("grp-a")
	s.missionCreated()
	s.member(protocol.EvtMembershipChanged, self, 1, protocol.MembershipActive)
	s.authorized("wi-1", testContract(1, protocol.UrgencyNormal, false))
	s.member(protocol.EvtMembershipChanged, "worker-2", 1, protocol.MembershipActive)
	s.member(protocol.EvtMembershipEnded, "worker-2", 1, protocol.MembershipEnded)
	o := newStream("grp-b")
	o.missionCreated()
	mustApply(t, st, append(s.evs, o.evs...)...)
	rng := func(g string, from, to uint64) protocol.EventRange {
		return protocol.EventRange{GroupID: g, FromSequence: from, ToSequence: to}
	}
	cases := []struct {
		name  string
		agent string
		r     protocol.EventRange
		max   int
		seqs  []uint64
		code  protocol.Code
	}{
		{"a member reads the range", self, rng("grp-a", 1, 3), 10, []uint64{1, 2, 3}, ""},
		{"bounded by max", self, rng("grp-a", 2, 5), 2, []uint64{2, 3}, ""},
		{"past the cursor left out", self, rng("grp-a", 4, 99), 10, []uint64{4, 5}, ""},
		{"a Group it is not a member of", self, rng("grp-b", 1, 1), 10, nil, protocol.CodeMembershipRequired},
		{"an unknown Group, answered alike", self, rng("grp-z", 1, 1), 10, nil, protocol.CodeMembershipRequired},
		{"an ended membership", "worker-2", rng("grp-a", 1, 1), 10, nil, protocol.CodeMembershipRequired},
		{"never a member", "worker-3", rng("grp-a", 1, 1), 10, nil, protocol.CodeMembershipRequired},
		{"a backward range", self, rng("grp-a", 3, 1), 10, nil, protocol.CodeInvalidCommand},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := st.CitedEvents(tc.agent, tc.r, tc.max)
			if tc.code != "" {
				if protocol.CodeOf(err) != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, raw := range evs {
				var ev protocol.Event
				if err := json.Unmarshal(raw, &ev); err != nil {
					t.Fatal(err)
				}
				if ev.GroupID != tc.r.GroupID {
					t.Fatalf("event of %s", ev.GroupID)
				}
				got = append(got, ev.Seq())
			}
			if !equalSeqs(got, tc.seqs) {
				t.Fatalf("sequences %v, want %v", got, tc.seqs)
			}
		})
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
