package queue

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// signedStream is randomStream with every event signed by key, as the
// authority sends them.
func signedStream(t *testing.T, group string, n int, seed uint64, key protocol.PrivateKey) []Incoming {
	t.Helper()
	var out []Incoming
	for _, in := range randomStream(group, n, mrand.New(mrand.NewPCG(seed, 1))).evs {
		ev := *in.Event
		ev.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: ev.OccurredAt}
		raw, err := protocol.SignedEvent(&ev, key)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

type workerBase struct {
	dir    string
	data   []byte
	page   int
	newest int
	keys   protocol.KeyResolver
	inbox  map[string][][]byte
}

func writeWorkerBase(t *testing.T) workerBase { return writeWorkerBaseN(t, 80, 20) }

// writeWorkerBaseN writes Groups g-a and g-b with about that many WorkItems
// each.
func writeWorkerBaseN(t *testing.T, na, nb int) workerBase {
	t.Helper()
	key, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, "authority-1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	b := workerBase{dir: dir, keys: protocol.NewKeySet(key.Public()), inbox: map[string][][]byte{}}
	for i, g := range []string{"g-a", "g-b"} {
		evs := signedStream(t, g, []int{na, nb}[i], uint64(i+1), key)
		for j := 0; j < len(evs); j += 16 {
			mustApply(t, s, evs[j:min(j+16, len(evs))]...)
		}
		for _, in := range evs {
			b.inbox[g] = append(b.inbox[g], in.Raw)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if b.data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	ms, err := storecheck.ReadMeta(path)
	if err != nil || ms.Used < 0 {
		t.Fatalf("meta: %+v %v", ms, err)
	}
	b.page, b.newest = ms.PageSize, ms.Used
	if rep, err := Check(dir, b.keys, time.Second); err != nil || !rep.OK {
		t.Fatalf("the undamaged store does not check: %v %+v", err, rep.Problems)
	}
	return b
}

type workerDamage struct {
	name string
	do   func(b workerBase, data []byte) []byte
	// wantGroup, wantSeq: the problem Check must name (0: any).
	wantGroup string
	wantSeq   uint64
	// refused: the worker must not open the copy when Check calls it
	// damaged (a truncated file, a 0-byte one included: bbolt would start
	// it afresh); the same rule decides both.
	refused bool
}

func workerDamages(b workerBase) []workerDamage {
	pages := len(b.data) / b.page
	var ds []workerDamage
	for _, p := range []int{2, 3, 4, 6, pages / 2, pages - 2, pages - 1} {
		ds = append(ds, workerDamage{name: fmt.Sprintf("zeroed page %d of %d", p, pages), do: func(b workerBase, d []byte) []byte {
			clear(d[p*b.page : (p+1)*b.page])
			return d
		}})
	}
	for _, n := range []int{0, 100, b.page, 2*b.page + 1, len(b.data) / 2, len(b.data) - b.page, len(b.data) - 1} {
		ds = append(ds, workerDamage{name: fmt.Sprintf("truncated to %d of %d bytes", n, len(b.data)), refused: true, do: func(_ workerBase, d []byte) []byte { return d[:n] }})
	}
	for _, seq := range []uint64{2, uint64(len(b.inbox["g-a"])) / 2, uint64(len(b.inbox["g-a"]))} {
		ds = append(ds, workerDamage{name: fmt.Sprintf("flipped byte in g-a event %d", seq), wantGroup: "g-a", wantSeq: seq, do: func(b workerBase, d []byte) []byte {
			// Every copy: a freed page may still hold a stale one.
			raw := b.inbox["g-a"][seq-1]
			j := bytes.Index(raw, []byte(`"occurredAt":"20`))
			for off := 0; j >= 0; {
				i := bytes.Index(d[off:], raw)
				if i < 0 {
					break
				}
				at := off + i + j + len(`"occurredAt":"20`)
				d[at] = '0' + (d[at]-'0'+1)%10
				off += i + len(raw)
			}
			return d
		}})
	}
	for _, newest := range []bool{true, false} {
		p := b.newest
		if !newest {
			p = 1 - p
		}
		ds = append(ds, workerDamage{name: fmt.Sprintf("flipped byte in meta page %d (newest %v)", p, newest), do: func(b workerBase, d []byte) []byte {
			d[p*b.page+16+48] ^= 1
			return d
		}})
	}
	return ds
}

// TestDamagedWorkerStoreCopies opens damaged copies of a real worker store
// with everything that reads one: Check, the Reader of inspect and the
// Store the worker runs on (then every read a worker makes at start).
// None may panic; each answers with STORE_DAMAGED or a report naming the
// damage; a copy Check calls sound must give back every event.
func TestDamagedWorkerStoreCopies(t *testing.T) {
	b := writeWorkerBase(t)
	for _, d := range workerDamages(b) {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), d.do(b, bytes.Clone(b.data)), 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Check(dir, b.keys, time.Second)
			if err != nil {
				t.Fatalf("Check could not run: %v", err)
			}
			if d.wantGroup != "" {
				found := false
				for _, p := range rep.Problems {
					found = found || (p.GroupID == d.wantGroup && p.Sequence == d.wantSeq)
				}
				if !found {
					t.Errorf("Check does not name %s sequence %d: %+v", d.wantGroup, d.wantSeq, rep.Problems)
				}
			}
			inspect := catchPanic(t, "inspect", func() string {
				r, err := OpenReader(dir, time.Second)
				if err != nil {
					return coded(t, "OpenReader", err)
				}
				defer r.Close()
				rp, err := r.Report()
				if err != nil {
					return coded(t, "Report", err)
				}
				return fmt.Sprintf("%d groups", len(rp.Groups))
			})
			worker := catchPanic(t, "Open", func() string { return openWorkerDamaged(t, dir, b) })
			summary := "check: ok"
			if !rep.OK {
				summary = fmt.Sprintf("check: %d problem(s), first %s: %s", len(rep.Problems), rep.Problems[0].Where, rep.Problems[0].What)
				if len(summary) > 200 {
					summary = summary[:200] + "…"
				}
			} else if worker != "opened intact" {
				t.Errorf("Check found nothing, the worker store answered %q", worker)
			}
			if d.refused && !rep.OK && !strings.HasPrefix(worker, "refused ") {
				t.Errorf("a copy Check calls damaged was opened by the worker: %q", worker)
			}
			t.Logf("%s\n\tworker: %s\n\tinspect: %s\n\t%s", d.name, worker, inspect, summary)
		})
	}
}

// openWorkerDamaged opens the copy as the worker does and makes the reads
// of a worker's start: cursors, every inbox event, queue and outbox.
func openWorkerDamaged(t *testing.T, dir string, b workerBase) string {
	s, err := Open(dir, Options{NoSocket: true})
	if err != nil {
		return coded(t, "Open", err)
	}
	defer s.Close()
	intact := true
	rolledBack := ""
	for g, evs := range b.inbox {
		if c := s.Cursor(g); c != uint64(len(evs)) {
			// An older meta page: the last batches are gone, and the
			// authority sends them again.
			intact, rolledBack = false, fmt.Sprintf("; %s cursor %d of %d", g, c, len(evs))
			evs = evs[:min(c, uint64(len(evs)))]
		}
		for i, want := range evs {
			got, err := s.Event(g, uint64(i+1))
			if err != nil {
				coded(t, "Event", err)
				intact = false
				break
			}
			if !bytes.Equal(got, want) {
				intact = false // a flipped byte: found by Check's signatures
				break
			}
		}
		_ = s.Items(g)
	}
	for _, err := range s.Outbox() {
		if err != nil {
			coded(t, "Outbox", err)
			intact = false
		}
	}
	if err := s.Rebuild(); err != nil {
		coded(t, "Rebuild", err)
		intact = false
	}
	if err := s.Failed(); err != nil {
		// Later calls fail fast with the same error.
		if _, err2 := s.Event("g-a", 1); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("a failed store answered %v after %v", err2, err)
		}
		return "opened, then failed: " + short(err)
	}
	if intact {
		return "opened intact"
	}
	return "opened; some reads differ" + rolledBack
}

// coded requires a STORE_DAMAGED error and returns its summary.
func coded(t *testing.T, what string, err error) string {
	t.Helper()
	var pe *protocol.Error
	if !asProtocolError(err, &pe) || pe.Details["reason"] != ReasonStoreDamaged {
		t.Errorf("%s: not a coded STORE_DAMAGED error: %v", what, err)
	}
	return "refused " + short(err)
}

func asProtocolError(err error, pe **protocol.Error) bool { return errors.As(err, pe) }

func short(err error) string {
	s := err.Error()
	if i := strings.Index(s, "; the worker store"); i > 0 {
		s = s[:i]
	}
	if len(s) > 150 {
		s = s[:150] + "…"
	}
	return s
}

func catchPanic(t *testing.T, what string, fn func() string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			out = "PANIC"
		}
	}()
	return fn()
}

// BenchmarkOpenPageWalk prices the page walk Open makes (checkPages) on the
// 100k-event store of BenchmarkRebuild100k against the whole Open.
func BenchmarkOpenPageWalk(b *testing.B) {
	dir := rebuildStore(b)
	path := filepath.Join(dir, FileName)
	var walk, open time.Duration
	for range b.N {
		start := time.Now()
		if err := checkPages(path); err != nil {
			b.Fatal(err)
		}
		walk += time.Since(start)
		start = time.Now()
		s, err := Open(dir, Options{NoSocket: true})
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		s.Close()
	}
	b.ReportMetric(walk.Seconds()/open.Seconds(), "walk/open")
}

// A page damaged while the store is open: the first read that meets it
// gets STORE_DAMAGED instead of a panic, and every later call fails fast
// with the same error.
func TestStoreFailsFastAfterDamage(t *testing.T) {
	b := writeWorkerBaseN(t, 6, 2)
	s, err := Open(b.dir, Options{NoSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw := b.inbox["g-a"][0]
	at := bytes.Index(b.data, raw)
	if at < 0 {
		t.Fatal("event not in the file")
	}
	f, err := os.OpenFile(filepath.Join(b.dir, FileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, b.page), int64(at/b.page*b.page)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = s.Event("g-a", 1)
	if coded(t, "Event", err); s.Failed() == nil {
		t.Fatalf("the store did not fail: %v", err)
	}
	for name, call := range map[string]func() error{
		"Event g-b": func() error { _, err := s.Event("g-b", 1); return err },
		"Apply":     func() error { _, err := s.Apply(b.incoming(t)); return err },
		"PutOutbox": func() error { return s.PutOutbox("act-1", []byte(`{"actionId":"act-1"}`)) },
		"Rebuild":   func() error { return s.Rebuild() },
	} {
		var pe *protocol.Error
		if err := call(); !errors.As(err, &pe) || pe != s.failed.Load() {
			t.Errorf("%s after the failure: %v, want the store's failure %v", name, err, s.Failed())
		}
	}
}

// incoming is one more event for g-a, signed like the rest.
func (b workerBase) incoming(t *testing.T) []Incoming {
	in, err := Decode(b.inbox["g-a"][len(b.inbox["g-a"])-1])
	if err != nil {
		t.Fatal(err)
	}
	return []Incoming{in}
}
