package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/missionweave/mwp-worker/protocol"
)

// modelCP is the naive model of one stored checkpoint.
type modelCP struct {
	epoch, seq uint64
	state      []byte
}

// Random Save/Delete/GC sequences against a naive model: Latest, List and
// the blob directory always agree with it.
func TestPropertyModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "cpprop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		db := openDB(t, dir, true)
		defer db.Close()
		keep := rapid.IntRange(1, 4).Draw(rt, "keep")
		s, err := OpenOptions(db, filepath.Join(dir, "blobs"), Options{InlineMax: 64, Keep: keep})
		if err != nil {
			rt.Fatal(err)
		}
		items := []string{"a", "b"}
		model := map[string][]modelCP{}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			item := rapid.SampledFrom(items).Draw(rt, "item")
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				n, err := s.Delete("g", item)
				if err != nil || n != len(model[item]) {
					rt.Fatalf("delete %s: %d %v, model has %d", item, n, err, len(model[item]))
				}
				delete(model, item)
			case 1:
				if _, err := s.GC(); err != nil {
					rt.Fatal(err)
				}
			default:
				epoch := rapid.Uint64Range(1, 3).Draw(rt, "epoch")
				// Small content alphabet so blobs get shared.
				state := gen(rapid.IntRange(0, 3).Draw(rt, "content"), rapid.SampledFrom([]int{0, 10, 200}).Draw(rt, "size"))
				_, err := s.Save(Key{"g", item, epoch}, t0, Meta{}, state)
				m := model[item]
				if len(m) > 0 && m[len(m)-1].epoch > epoch {
					if protocol.CodeOf(err) != protocol.CodeWorkStaleOwnership {
						rt.Fatalf("stale save accepted: %v", err)
					}
					break
				}
				if err != nil {
					rt.Fatal(err)
				}
				seq := uint64(1)
				if len(m) > 0 {
					seq = m[len(m)-1].seq + 1
				}
				m = append(m, modelCP{epoch, seq, state})
				model[item] = m[max(0, len(m)-keep):]
			}
			want := map[string]bool{}
			for _, item := range items {
				m := model[item]
				got, err := s.Latest("g", item)
				if len(m) == 0 {
					if !errors.Is(err, ErrNotFound) {
						rt.Fatalf("latest %s: %v, model empty", item, err)
					}
					continue
				}
				top := m[len(m)-1]
				if err != nil || got.Seq != top.seq || got.Key.OwnershipEpoch != top.epoch || !bytes.Equal(got.State, top.state) {
					rt.Fatalf("latest %s: %+v %v, model %+v", item, got, err, top)
				}
				list, err := s.List("g", item)
				if err != nil || len(list) != len(m) {
					rt.Fatalf("list %s: %d %v, model %d", item, len(list), err, len(m))
				}
				for _, c := range m {
					if len(c.state) > 64 {
						want[protocol.Digest(c.state)[7:]] = true
					}
				}
			}
			var files []string
			for name := range want {
				files = append(files, name)
			}
			slices.Sort(files)
			if got := blobFileNames(t, dir); !slices.Equal(got, files) {
				rt.Fatalf("blob files %v, model %v", got, files)
			}
		}
	})
}
