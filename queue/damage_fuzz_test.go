package queue

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

var fuzzBase struct {
	once sync.Once
	data []byte
	keys protocol.KeyResolver
}

// FuzzOpenDamagedStore patches bytes of a small valid store (at an offset
// the input chooses) and opens the result with Check, the Reader and the
// Store: whatever the bytes, none may panic, and a refusal is coded.
func FuzzOpenDamagedStore(f *testing.F) {
	f.Add(uint32(0), []byte{0})
	f.Add(uint32(4096+16+48), []byte{1})
	f.Add(uint32(2*4096), bytes.Repeat([]byte{0}, 4096))
	f.Add(uint32(5*4096+40), []byte("garbage"))
	f.Add(uint32(1<<31), []byte{}) // truncation: see below
	f.Fuzz(func(t *testing.T, off uint32, patch []byte) {
		fuzzBase.once.Do(func() {
			b := writeWorkerBaseN(t, 6, 2)
			fuzzBase.data, fuzzBase.keys = b.data, b.keys
		})
		data := bytes.Clone(fuzzBase.data)
		if off&(1<<31) != 0 {
			// The high bit asks for a truncation at the rest of off.
			data = data[:int(off&^(1<<31))%(len(data)+1)]
		} else {
			at := int(off) % len(data)
			copy(data[at:], patch)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Check(dir, fuzzBase.keys, time.Second); err != nil {
			t.Fatalf("Check could not run: %v", err)
		}
		if r, err := OpenReader(dir, time.Second); err == nil {
			_, _ = r.Report()
			r.Close()
		}
		s, err := Open(dir, Options{NoSocket: true})
		if err != nil {
			if _, ok := err.(*protocol.Error); !ok && !errors.Is(err, ErrSchema) {
				t.Fatalf("Open: uncoded error %v", err)
			}
			return
		}
		defer s.Close()
		for _, g := range s.GroupIDs() {
			for seq := uint64(1); seq <= s.Cursor(g); seq++ {
				if _, err := s.Event(g, seq); err != nil {
					break
				}
			}
		}
		for _, err := range s.Outbox() {
			_ = err
		}
		_ = s.Rebuild()
	})
}
