package queue

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/missionweave/mwp-worker/group"
)

// The narrower payload types of the view (payload.go) leave the view as
// group's full types do, for every event of every projection case and of
// a random stream: the same change, or the same error code.
func TestSlimPayloadSameEntry(t *testing.T) {
	var streams []*stream
	for _, tc := range append(projectCases(), replayCases()...) {
		st := newStream("g")
		if tc.setup != nil {
			tc.setup(st)
		}
		tc.event(st)
		streams = append(streams, st)
	}
	streams = append(streams, randomStream("g", 40, rand.New(rand.NewPCG(7, 8))))
	slim := 0
	for _, st := range streams {
		g := newGroupState("g")
		for _, in := range st.evs {
			f := factOf(in.Event)
			if !projected(f.Type) {
				continue
			}
			full, ferr := group.Decode(f.Type, f.Payload)
			narrow, nerr := decodePayload(f.Type, f.Payload)
			if (ferr == nil) != (nerr == nil) || ferr != nil && protocolError(ferr).Code != protocolError(nerr).Code {
				t.Fatalf("%s %s: decode errors %v / %v", f.Type, f.EventID, ferr, nerr)
			}
			if ferr != nil {
				continue
			}
			if reflect.TypeOf(full) != reflect.TypeOf(narrow) {
				t.Fatalf("%s: decoded as %T, want %T", f.Type, narrow, full)
			}
			if !reflect.DeepEqual(full, narrow) {
				slim++
			}
			want, werr := projectPayload(g, &f, full)
			got, gerr := projectPayload(g, &f, narrow)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gerr, werr) {
				t.Fatalf("%s %s: the narrow payload projects to\n%+v (%v)\nwant\n%+v (%v)", f.Type, f.EventID, got, gerr, want, werr)
			}
			ov := newOverlay(g)
			ov.record(want)
			ov.merge()
		}
	}
	if slim == 0 {
		t.Fatal("no payload was decoded narrower than group's type")
	}
}
