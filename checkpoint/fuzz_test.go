package checkpoint

import (
	"bytes"
	"testing"
)

// decodeRecord reads bytes from disk: whatever they are, it returns a
// record or ErrCorrupt, never panics, and what it accepts re-encodes to
// the same record.
func FuzzDecodeRecord(f *testing.F) {
	c := Checkpoint{ID: "cp-1", Key: Key{"g", "w", 2}, Seq: 3, At: t0, Meta: Meta{Phase: "p"},
		Digest: "sha256:" + string(bytes.Repeat([]byte("a"), 64)), Size: 2}
	rec, _ := encodeRecord(&c, []byte("hi"))
	f.Add(rec)
	c.Blob, c.Size = true, 1<<20
	rec, _ = encodeRecord(&c, nil)
	f.Add(rec)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, inline, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := encodeRecord(&got, inline)
		if err != nil {
			t.Fatal(err)
		}
		got2, inline2, err := decodeRecord(again)
		if err != nil || !bytes.Equal(inline, inline2) || got2.ID != got.ID || got2.Key != got.Key ||
			got2.Seq != got.Seq || !got2.At.Equal(got.At) || got2.Digest != got.Digest || got2.Size != got.Size {
			t.Fatalf("round trip changed the record: %+v -> %+v (%v)", got, got2, err)
		}
	})
}
