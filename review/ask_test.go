package review

import (
	"errors"
	"strings"
	"testing"
)

// Ask reads the decision a terminal types: approve with a comment,
// changes one per line up to an empty one, or no decision.
func TestAsk(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Answer
		none bool // ErrNoDecision
	}{
		{in: "a\nfine\n", want: Answer{Approve: true, Comment: "fine"}},
		{in: "Approve\n", want: Answer{Approve: true}},
		{in: "maybe\nr\nfix A\n fix B\n\nignored\n", want: Answer{Comment: "fix A\n fix B"}},
		{in: "r\n\n", none: true},
		{in: "q\n", none: true},
		{in: "", none: true},
		{in: "x\ny\nz\na\n", none: true},
	} {
		var out strings.Builder
		got, err := Ask(strings.NewReader(tc.in), &out)
		if tc.none {
			if !errors.Is(err, ErrNoDecision) {
				t.Errorf("%q: %+v, %v; want no decision", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if !strings.HasPrefix(out.String(), "Approve, request changes, or quit? [a/r/q]: ") {
			t.Errorf("%q: prompt %q", tc.in, out.String())
		}
	}
}
