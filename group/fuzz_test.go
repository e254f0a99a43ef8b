package group

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// FuzzDecodeFold: any payload bytes under any event type decode to the
// type's payload or a *protocol.Error, and Fold of what decodes never
// panics, on an empty Group or one with a Mission and a WorkItem; a
// refused fold is a *protocol.Error too.
func FuzzDecodeFold(f *testing.F) {
	types := make([]protocol.EventType, 0, len(Events))
	for t := range Events {
		types = append(types, t)
	}
	slices.Sort(types)
	k := newKit(f)
	k.authorize("wi")
	for _, e := range k.offer("wi", "of-1", "w1").Events {
		raw, _ := json.Marshal(e.Payload)
		f.Add(uint8(slices.Index(types, e.Type)), raw)
	}
	for i, t := range types {
		p, _ := NewPayload(t)
		raw, _ := json.Marshal(p)
		f.Add(uint8(i), raw)
	}
	f.Add(uint8(0), []byte(`{}`))
	f.Add(uint8(3), []byte(`{"workItemId":"wi","state":"queued","ownership":null}`))
	base := k.g
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		typ := types[int(which)%len(types)]
		p, err := Decode(typ, raw)
		if err != nil {
			if _, ok := err.(*protocol.Error); !ok {
				t.Fatalf("%s: error %T", typ, err)
			}
			return
		}
		for _, g := range []*Group{NewGroup("g", Limits{}), base.shallowCopy()} {
			ev := Event{Type: typ, Aggregate: protocol.Aggregate{Kind: Events[typ].Aggregate, ID: "wi"}, Revision: 9, Payload: p}
			if err := g.Fold(ev); err != nil {
				if _, ok := err.(*protocol.Error); !ok {
					t.Fatalf("%s: fold error %T: %v", typ, err, err)
				}
			}
		}
	})
}
