package coordinator

import (
	"regexp"
	"strings"
	"testing"
)

// An action id is the same for the same decision (a restarted
// coordinator resends under it) and differs when anything the decision is
// about differs: the Group and the Mission above all, since the authority
// keeps one agent's action ids across all its Groups. It is a valid wire
// id (protocol/schemas/common.schema.json) whatever the lengths of the ids
// it is made of.
func TestActionIDUniquePerGroupAndAction(t *testing.T) {
	type in struct {
		agent, group, mission string
		seq                   uint64
		a                     action
	}
	base := in{"c1", "grp-a", "mis-a", 7, action{kind: actMember, item: "w1"}}
	long := strings.Repeat("x", 128)
	cases := []struct {
		name string
		edit func(*in)
	}{
		{"agent", func(i *in) { i.agent = "c2" }},
		{"group", func(i *in) { i.group = "grp-b" }},
		{"mission", func(i *in) { i.mission = "mis-b" }},
		{"position", func(i *in) { i.seq = 8 }},
		{"kind", func(i *in) { i.a.kind = actOffer }},
		{"item", func(i *in) { i.a.item = "w2" }},
		{"input", func(i *in) { i.a.digest = "sha256:01" }},
		{"rebuilt after a collision", func(i *in) { i.a.rebuild = 1 }},
		// Fields joined by a separator would run together here.
		{"boundary", func(i *in) { i.group, i.mission = "grp-a-mis", "a" }},
		{"longest ids", func(i *in) {
			i.agent, i.group, i.mission, i.a.item, i.a.kind, i.seq = long, long, long, long, actApproval, ^uint64(0)
		}},
	}
	id := func(i in) string { return actionID(i.agent, i.group, i.mission, i.seq, i.a) }
	wire := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	want := id(base)
	if again := id(base); again != want {
		t.Fatalf("the same decision named %s, then %s", want, again)
	}
	seen := map[string]string{want: "base"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := base
			tc.edit(&i)
			got := id(i)
			if !wire.MatchString(got) {
				t.Errorf("%q (%d characters) is not a wire id", got, len(got))
			}
			if prev, dup := seen[got]; dup {
				t.Errorf("%s and %s both named %s", tc.name, prev, got)
			}
			seen[got] = tc.name
		})
	}
}
