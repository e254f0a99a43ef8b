package group

import (
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The defaults are the figures docs/wire.md's limits table gives; a zero or
// negative limit takes its default, a set one is kept.
func TestLimitsDefaults(t *testing.T) {
	d := DefaultLimits()
	if want := (Limits{MaxCandidates: 8, StartWithin: 5 * time.Minute, LeaseDuration: 2 * time.Minute, BlockedHold: 30 * time.Minute}); d != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", d, want)
	}
	set := Limits{MaxCandidates: 1, StartWithin: time.Millisecond, LeaseDuration: time.Millisecond, BlockedHold: time.Millisecond}
	for _, tc := range []struct {
		name string
		in   Limits
		want Limits
	}{
		{"zero", Limits{}, d},
		{"negative", Limits{MaxCandidates: -1, StartWithin: -1, LeaseDuration: -1, BlockedHold: -1}, d},
		{"set", set, set},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// mission.create names this Group or none.
func TestMissionCreateNamesThisGroup(t *testing.T) {
	for _, tc := range []struct {
		group string
		ok    bool
	}{{"grp-b", false}, {"grp-a", true}, {"", true}} {
		k := &kit{t: t, g: NewGroup("grp-a", testLimits()), now: t0}
		in := k.human(protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
		in.GroupID = tc.group
		if tc.ok {
			k.must(in)
			continue
		}
		if e := k.refuse(in, protocol.CodeInvalidCommand); e.Pointer != "/groupId" {
			t.Errorf("group %q: refused at %q", tc.group, e.Pointer)
		}
	}
}
