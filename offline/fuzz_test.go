package offline

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func fuzzSeeds(f *testing.F) {
	key := testKey(f)
	for i, typ := range []protocol.CommandType{protocol.CmdLeaseRenew, protocol.CmdWorkCheckpoint, protocol.CmdResourceUsageRecord, protocol.CmdMessagePost} {
		b := binding(time.Duration(i)*time.Second, protocol.Usage{Tokens: uint64(i), Money: 0.5})
		raw, err := SignBuffered(command(f, typ, b, i), b, key)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"extensions":{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{}}}}`))
	f.Add([]byte(`{"type":"work.checkpoint","payload":null,"extensions":{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":[]}}}`))
}

// A Command from anywhere never panics BindingOf or CheckBuffered, and a
// binding BindingOf accepts is tied to its command.
func FuzzBindingOf(f *testing.F) {
	fuzzSeeds(f)
	hist := historyOf(testLease())
	f.Fuzz(func(t *testing.T, raw []byte) {
		var c protocol.Command
		if protocol.DecodeExact(raw, &c, protocol.CodeInvalidCommand) != nil {
			return
		}
		b, err := BindingOf(&c)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodeInvalidCommand {
				t.Fatalf("BindingOf: %v is not INVALID_COMMAND", err)
			}
			return
		}
		if b.AgentID != c.Actor.ID || b.GroupID != c.GroupID || !Bufferable(c.Type) {
			t.Fatalf("accepted a binding not tied to its command: %+v", b)
		}
		if err := CheckBuffered(b, hist, t0); err != nil {
			if _, ok := err.(*protocol.Error); !ok {
				t.Fatalf("CheckBuffered: %T", err)
			}
		}
	})
}

// Whatever a caller hands Append is either refused with a protocol error or
// yields an entry whose binding matches the bytes.
func FuzzParseBuffered(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := parseBuffered(raw)
		if err != nil {
			if protocol.CodeOf(err) == protocol.CodeInternalError {
				t.Fatalf("parseBuffered: %v", err)
			}
			return
		}
		c := decodeCommand(t, raw)
		b, err := BindingOf(c)
		if err != nil || !sameBinding(b, e.Binding) || e.ActionID != c.ActionID {
			t.Fatalf("entry %+v disagrees with its bytes (%v)", e, err)
		}
	})
}

// Corrupt records in the store are errors, never panics.
func FuzzDecodeRecord(f *testing.F) {
	rec, _ := encodeRecord(entryHeader{ActionID: "a", Type: protocol.CmdLeaseRenew, GroupID: "g", Binding: binding(0, protocol.Usage{})}, []byte(`{}`))
	f.Add(binary.BigEndian.AppendUint64(nil, 1), rec)
	reb, _ := encodeRecord(rebasedHeader{SessionEpoch: 1, IssuedAt: protocol.NewTime(t0)}, []byte(`{}`))
	f.Add([]byte{1}, reb)
	f.Add([]byte{}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		decodeEntry(k, v)
		decodeRebased(v)
	})
}
