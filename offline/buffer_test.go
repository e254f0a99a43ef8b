package offline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

func TestAppendPendingRemove(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	buf := openBuffer(t, tempDB(t), Limits{})
	var raws [][]byte
	for i := range 5 {
		raw := signedBuffered(t, key, i)
		raws = append(raws, raw)
		e := mustAppend(t, buf, raw)
		if e.ID != uint64(i+1) || e.Type != protocol.CmdLeaseRenew || e.GroupID != "grp-a" || e.Binding.UsageDelta.Tokens != uint64(i) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if err := buf.Remove(2); err != nil {
		t.Fatal(err)
	}
	if err := buf.Remove(2); err != nil { // repeated: nothing happens
		t.Fatal(err)
	}
	if err := buf.Remove(99); err != nil {
		t.Fatal(err)
	}
	es := pending(t, buf)
	wantIdx := []int{0, 2, 3, 4}
	if len(es) != len(wantIdx) {
		t.Fatalf("%d pending, want %d", len(es), len(wantIdx))
	}
	var size int64
	for i, e := range es {
		if !bytes.Equal(e.Signed, raws[wantIdx[i]]) || e.ID != uint64(wantIdx[i]+1) || e.Rebased != nil {
			t.Fatalf("pending[%d] = id %d, want the command appended as %d", i, e.ID, wantIdx[i]+1)
		}
		size += int64(len(e.Signed))
	}
	if n, sz, err := buf.Len(); err != nil || n != 4 || sz != size {
		t.Fatalf("Len = %d, %d, %v; want 4, %d", n, sz, err, size)
	}
	if _, err := buf.Get(2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get removed: %v", err)
	}
	// A new append goes after everything, even after a removal.
	if e := mustAppend(t, buf, signedBuffered(t, key, 9)); e.ID != 6 {
		t.Fatalf("id after removal %d, want 6", e.ID)
	}
}

func TestAppendIdempotentAndCollision(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	buf := openBuffer(t, tempDB(t), Limits{})
	raw := signedBuffered(t, key, 1)
	first := mustAppend(t, buf, raw)
	again := mustAppend(t, buf, raw) // a retry after an uncertain crash
	if again.ID != first.ID {
		t.Fatalf("same bytes appended twice: ids %d and %d", first.ID, again.ID)
	}
	if n, _, _ := buf.Len(); n != 1 {
		t.Fatalf("%d buffered, want 1", n)
	}
	// Same actionId, other content.
	b := binding(5*time.Millisecond, protocol.Usage{})
	c := command(t, protocol.CmdLeaseRenew, b, 1)
	other, err := SignBuffered(c, b, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buf.Append(other); protocol.CodeOf(err) != protocol.CodeActionIDCollision {
		t.Fatalf("collision: %v", err)
	}
}

func TestAppendRefusesWhatTheAuthorityWould(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	buf := openBuffer(t, tempDB(t), Limits{})
	b := binding(time.Minute, protocol.Usage{})
	sign := func(c *protocol.Command) []byte {
		raw, err := protocol.SignedCommand(c, key)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	bound := func(typ protocol.CommandType) *protocol.Command {
		c := command(t, typ, b, 1)
		if err := Bind(c, b); err != nil {
			t.Fatal(err)
		}
		c.IssuedAt = b.BufferedAt
		return c
	}
	noBinding := command(t, protocol.CmdLeaseRenew, b, 1)
	noBinding.IssuedAt = b.BufferedAt
	noEpoch := bound(protocol.CmdLeaseRenew)
	noEpoch.MembershipEpoch = nil
	badPayload := bound(protocol.CmdLeaseRenew)
	badPayload.Payload = []byte(`{"workItemId":"wi-7","ownershipEpoch":2,"leaseId":"lease-9"}`)
	unsigned := bound(protocol.CmdLeaseRenew)
	unsigned.Signature = protocol.Signature{Alg: "Ed25519", KeyID: key.KeyID, CreatedAt: unsigned.IssuedAt}
	unsignedRaw, _ := protocol.Marshal(unsigned)
	otherKey, _ := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, "worker-2", "k1"), nil)
	wrongSigner, _ := protocol.SignedCommand(bound(protocol.CmdLeaseRenew), otherKey)

	for _, tc := range []struct {
		name string
		raw  []byte
		code protocol.Code
	}{
		{"not JSON", []byte(`{"actionId":`), protocol.CodeProtocolViolation},
		{"not an object", []byte(`[]`), protocol.CodeProtocolViolation},
		{"no offline binding", sign(noBinding), protocol.CodeInvalidCommand},
		{"not bufferable", sign(bound(protocol.CmdWorkSubmit)), protocol.CodeSchemaValidationFailed},
		{"epoch rules of spec 15.1", sign(noEpoch), protocol.CodeInvalidCommand},
		{"payload schema", sign(badPayload), protocol.CodeSchemaValidationFailed},
		{"unsigned", unsignedRaw, protocol.CodeSchemaValidationFailed},
		{"key of another principal", wrongSigner, protocol.CodeAuthInvalidSignature},
	} {
		if _, err := buf.Append(tc.raw); protocol.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if n, sz, _ := buf.Len(); n != 0 || sz != 0 {
		t.Fatalf("refused commands were buffered: %d, %d bytes", n, sz)
	}
}

func TestBufferBounds(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	raw := func(i int) []byte { return signedBuffered(t, key, i) }
	size := int64(len(raw(0)))

	t.Run("count", func(t *testing.T) {
		buf := openBuffer(t, tempDB(t), Limits{MaxCommands: 3})
		for i := range 3 {
			mustAppend(t, buf, raw(i))
		}
		if _, err := buf.Append(raw(3)); !errors.Is(err, ErrFull) {
			t.Fatalf("4th append: %v, want ErrFull", err)
		}
		if n, _, _ := buf.Len(); n != 3 {
			t.Fatalf("%d buffered after ErrFull", n)
		}
		if err := buf.Remove(1); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, buf, raw(3)) // the paused command goes in once there is room
		if es := pending(t, buf); es[len(es)-1].ActionID != "act-wi-7-3" {
			t.Fatalf("last pending %s", es[len(es)-1].ActionID)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		buf := openBuffer(t, tempDB(t), Limits{MaxBytes: 2*size + size/2})
		mustAppend(t, buf, raw(0))
		mustAppend(t, buf, raw(1))
		if _, err := buf.Append(raw(2)); !errors.Is(err, ErrFull) {
			t.Fatalf("3rd append: %v, want ErrFull", err)
		}
		if _, sz, _ := buf.Len(); sz > buf.Limits().MaxBytes {
			t.Fatalf("%d bytes over the bound %d", sz, buf.Limits().MaxBytes)
		}
	})
	t.Run("exactly full", func(t *testing.T) {
		// A command of exactly MaxBytes fits an empty buffer and fills it.
		buf := openBuffer(t, tempDB(t), Limits{MaxBytes: size})
		mustAppend(t, buf, raw(0))
		if n, sz, _ := buf.Len(); n != 1 || sz != size {
			t.Fatalf("%d commands, %d bytes buffered, want 1 and %d", n, sz, size)
		}
	})
	t.Run("larger than the buffer", func(t *testing.T) {
		buf := openBuffer(t, tempDB(t), Limits{MaxBytes: size - 1})
		if _, err := buf.Append(raw(0)); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrFull) {
			t.Fatalf("append: %v, want ErrTooLarge", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		if l := openBuffer(t, tempDB(t), Limits{}).Limits(); l.MaxCommands != DefaultMaxCommands || l.MaxBytes != DefaultMaxBytes {
			t.Fatalf("limits %+v", l)
		}
	})
}

// A worker restarted while still offline finds its buffer, counters and
// persisted rebases as it left them, inside the worker's own store, and can
// rebuild its offline window from the bindings.
func TestRestartWhileOffline(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	dir := t.TempDir()
	st, err := queue.Open(dir, queue.Options{NoSocket: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(Config{}, at(-time.Hour))
	m.Connected(at(-time.Hour))
	m.Reconciled(at(-time.Hour))
	m.SetLease(testLease())
	m.Disconnected(t0)
	buf := openBuffer(t, st.DB(), Limits{MaxCommands: 10})
	var want [][]byte
	for i := range 4 {
		b, err := m.Binding(item, at(time.Duration(i)*30*time.Second), protocol.Usage{Tokens: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := SignBuffered(command(t, protocol.CmdWorkCheckpoint, b, i), b, key)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, buf, raw)
		want = append(want, raw)
	}
	sess := CurrentSession{SessionEpoch: 4, MembershipEpochs: map[string]uint64{"grp-a": 1}, Now: at(5 * time.Minute)}
	rebased, err := buf.Prepare(1, sess, key)
	if err != nil {
		t.Fatal(err)
	}
	n0, sz0, _ := buf.Len()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = queue.Open(dir, queue.Options{NoSocket: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	buf = openBuffer(t, st.DB(), Limits{MaxCommands: 10})
	es := pending(t, buf)
	if len(es) != len(want) {
		t.Fatalf("%d pending after restart, want %d", len(es), len(want))
	}
	for i, e := range es {
		if !bytes.Equal(e.Signed, want[i]) {
			t.Fatalf("pending[%d] changed across the restart", i)
		}
	}
	if n, sz, _ := buf.Len(); n != n0 || sz != sz0 {
		t.Fatalf("Len %d/%d after restart, was %d/%d", n, sz, n0, sz0)
	}
	if es[0].Rebased == nil || !bytes.Equal(es[0].Rebased.Raw, rebased) {
		t.Fatal("the persisted rebase was lost")
	}
	again, err := buf.Prepare(1, CurrentSession{SessionEpoch: 4, MembershipEpochs: sess.MembershipEpochs, Now: sess.Now.Add(time.Second)}, key)
	if err != nil || !bytes.Equal(again, rebased) {
		t.Fatalf("resend after restart is not byte-identical (%v)", err)
	}
	// The restarted monitor, told the original disconnect, computes the
	// same grace deadline the bindings carry.
	m2 := NewMonitor(Config{}, es[0].Binding.DisconnectedAt.Time)
	m2.SetLease(testLease())
	if dl, ok := m2.GraceDeadline(item); !ok || !protocol.NewTime(dl).Equal(es[0].Binding.GraceDeadline.Time) {
		t.Fatalf("deadline after restart %s, binding says %s", dl, es[0].Binding.GraceDeadline)
	}
	if m2.MayStart() {
		t.Fatal("a restarted, unconnected worker may start work")
	}
}

func TestOpenBufferSchema(t *testing.T) {
	t.Parallel()
	db := openDB(t, filepath.Join(t.TempDir(), "x.db"), true)
	openBuffer(t, db, Limits{})
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktRoot).Bucket(bktMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, 99))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBuffer(db, Limits{}); !errors.Is(err, ErrSchema) {
		t.Fatalf("open of schema 99: %v", err)
	}
}

// A record is a length-prefixed header and the bytes after it; any prefix
// that does not fit the record is an error, never a panic or a short read.
func TestSplitRecord(t *testing.T) {
	t.Parallel()
	hdr := entryHeader{ActionID: "a", Type: protocol.CmdLeaseRenew, GroupID: "g"}
	for _, payload := range [][]byte{nil, []byte(`{}`)} {
		rec, err := encodeRecord(hdr, payload)
		if err != nil {
			t.Fatal(err)
		}
		var got entryHeader
		p, err := splitRecord(rec, &got)
		if err != nil || !bytes.Equal(p, payload) || got.ActionID != "a" {
			t.Fatalf("round trip of %q: %q, %+v, %v", payload, p, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"prefix only", []byte{5}},
		{"header one byte short", append([]byte{5}, "{}{}"...)},
		{"header as long as the record", append([]byte{5}, "{}"...)},
		{"prefix overflows", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		var h entryHeader
		if _, err := splitRecord(tc.v, &h); err == nil || err.Error() != "offline: corrupt record" {
			t.Errorf("%s: %v, want the corrupt record error", tc.name, err)
		}
	}
}
