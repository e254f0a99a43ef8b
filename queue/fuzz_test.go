package queue

import (
	"bytes"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// FuzzDecode feeds arbitrary bytes to Decode, the first decoder of events
// from the wire: it never panics, and what it accepts has canonical Raw
// bytes that decode again to the same event.
func FuzzDecode(f *testing.F) {
	s := newStream("grp-a")
	s.missionCreated()
	s.message("hello")
	for _, in := range s.evs {
		f.Add(in.Raw)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"eventId":"e","groupId":"g","sequence":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Decode(data)
		if err != nil {
			if protocol.CodeOf(err) == "" {
				t.Fatalf("error without a protocol code: %v", err)
			}
			return
		}
		if in.Event == nil {
			t.Fatal("accepted without an event")
		}
		again, err := Decode(in.Raw)
		if err != nil {
			t.Fatalf("canonical bytes do not decode: %v", err)
		}
		if !bytes.Equal(again.Raw, in.Raw) || again.Event.EventID != in.Event.EventID {
			t.Fatal("canonical bytes are not stable")
		}
	})
}
