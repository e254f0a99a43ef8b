package authoritylite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// damagedLog is a real log written by the service harness: grp-a with
// enough events to span many pages and to reach past the events Open
// verifies itself, grp-b with a few.
type damagedLog struct {
	dir    string // a crash copy with authority.key beside it
	size   int64
	page   int
	events map[string][][]byte // the stored events by Group, in order
	newest int                 // the meta page with the higher txid
}

func writeDamageBase(t *testing.T) damagedLog {
	t.Helper()
	k := newSvc(t)
	for i := 1; i <= 70; i++ {
		k.toActive(fmt.Sprintf("wi-%d", i))
	}
	if _, err := k.alice.Do(context.Background(), protocol.CmdMissionCreate, "grp-b",
		&protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Other", Objective: "keep going", PriorityClass: protocol.PriorityNormal}); err != nil {
		t.Fatal(err)
	}
	dir := crashCopy(t, k.s)
	if _, _, err := protocol.WriteKeyFiles(dir, "authority", k.akey); err != nil {
		t.Fatal(err)
	}
	b := damagedLog{dir: dir, events: map[string][][]byte{}}
	if err := ReadLog(filepath.Join(dir, LogFile), time.Second, func(g string, raw []byte) error {
		b.events[g] = append(b.events[g], bytes.Clone(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ms, err := storecheck.ReadMeta(filepath.Join(dir, LogFile))
	if err != nil || ms.Used < 0 {
		t.Fatalf("meta of the base copy: %+v %v", ms, err)
	}
	b.size, b.page, b.newest = ms.FileSize, ms.PageSize, ms.Used
	if n := len(b.events["grp-a"]); n <= DefaultOpenCheckEvents+10 {
		t.Fatalf("grp-a has %d events; the test needs more than Open verifies (%d)", n, DefaultOpenCheckEvents)
	}
	return b
}

// damage is one way to damage a copy of the log file.
type damage struct {
	name string
	do   func(t *testing.T, b damagedLog, data []byte) []byte
	// wantOpen is the reason Open must refuse with, "" to let it open.
	wantOpen string
	// wantGroup is a Group Open must leave unserved (after the background
	// check), with wantSeq the sequence the check must name.
	wantGroup string
	wantSeq   uint64
}

func zeroPage(n int) damage {
	return damage{name: fmt.Sprintf("zeroed page %d", n), do: func(t *testing.T, b damagedLog, data []byte) []byte {
		p := n
		if p < 0 {
			p += int(b.size) / b.page
		}
		clear(data[p*b.page : (p+1)*b.page])
		return data
	}}
}

func truncateAt(name string, at func(b damagedLog) int64) damage {
	return damage{name: "truncated to " + name, do: func(t *testing.T, b damagedLog, data []byte) []byte {
		return data[:at(b)]
	}}
}

// flipEvent changes one digit of grp-a's event seq (a valid JSON text
// still, so only the signature can tell).
func flipEvent(seq uint64) damage {
	return damage{name: fmt.Sprintf("flipped byte in event %d", seq), wantGroup: "grp-a", wantSeq: seq,
		do: func(t *testing.T, b damagedLog, data []byte) []byte {
			// Every copy: a freed page may still hold a stale one, ahead
			// of the live one in the file.
			if flipAll(data, b.events["grp-a"][seq-1]) == 0 {
				t.Fatalf("event %d not found in the file", seq)
			}
			return data
		}}
}

func flipMeta(newest bool) damage {
	name := "flipped byte in the older meta page"
	if newest {
		name = "flipped byte in the newest meta page"
	}
	d := damage{name: name, do: func(t *testing.T, b damagedLog, data []byte) []byte {
		p := b.newest
		if !newest {
			p = 1 - p
		}
		data[p*b.page+16+48] ^= 0x01 // its txid: the checksum no longer matches
		return data
	}}
	if newest {
		d.wantOpen = ReasonLogRolledBack
	}
	return d
}

func damages() []damage {
	return []damage{
		zeroPage(2), zeroPage(3), zeroPage(4), zeroPage(6), zeroPage(10), zeroPage(-3), zeroPage(-1),
		truncateAt("100 bytes", func(damagedLog) int64 { return 100 }),
		truncateAt("one page", func(b damagedLog) int64 { return int64(b.page) }),
		truncateAt("two pages and a byte", func(b damagedLog) int64 { return int64(2*b.page + 1) }),
		truncateAt("half", func(b damagedLog) int64 { return b.size / 2 }),
		truncateAt("size minus a page", func(b damagedLog) int64 { return b.size - int64(b.page) }),
		truncateAt("size minus a byte", func(b damagedLog) int64 { return b.size - 1 }),
		flipEvent(3), flipEvent(200), flipEvent(0), // 0: the newest, set below
		flipMeta(true), flipMeta(false),
	}
}

// TestDamagedLogCopies opens damaged copies of a real log with everything
// that reads one: the authority (Open, then SUBSCRIBE's read of every
// Group and a command), ReadLog (inspect events) and Check. None may
// panic; each must answer with a coded error or a report naming the
// damage, and a copy Check calls sound must really serve what the
// original held.
func TestDamagedLogCopies(t *testing.T) {
	b := writeDamageBase(t)
	orig, err := os.ReadFile(filepath.Join(b.dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(len(b.events["grp-a"]))
	for _, d := range damages() {
		if d.wantSeq == 0 && d.wantGroup != "" {
			d.wantSeq, d.name = last-1, fmt.Sprintf("flipped byte in event %d (among the newest)", last-1)
			d.do = flipEvent(last - 1).do
		}
		t.Run(d.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			if err := os.CopyFS(dir, os.DirFS(b.dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, KeyFile), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, LogFile)
			if err := os.WriteFile(path, d.do(t, b, bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			// Read-only openers first: Open may commit, which rewrites the
			// older meta page.
			rep, err := Check(path, time.Second)
			if err != nil {
				t.Fatalf("Check could not run: %v", err)
			}
			var summary []string
			summary = append(summary, "inspect events: "+noPanic(t, "ReadLog", func() string {
				n := 0
				err := ReadLog(path, time.Second, func(string, []byte) error { n++; return nil })
				if err != nil {
					if ReasonOf(err) == "" && !strings.Contains(err.Error(), "invalid") {
						t.Errorf("ReadLog: uncoded error %v", err)
					}
					return "error " + firstWords(err)
				}
				return fmt.Sprintf("%d events", n)
			}))
			served := noPanic(t, "authority", func() string { return openDamaged(t, dir, d, b) })
			summary = append([]string{"authority: " + served}, summary...)
			if rep.OK {
				summary = append(summary, "check: ok")
				if served != "served intact" {
					t.Errorf("Check found nothing, but the authority answered %q", served)
				}
			} else {
				summary = append(summary, fmt.Sprintf("check: %d problem(s), first %s: %s", len(rep.Problems), rep.Problems[0].Where, rep.Problems[0].What))
			}
			if d.wantGroup != "" && !namesProblem(rep, d.wantGroup, d.wantSeq) {
				t.Errorf("Check does not name %s sequence %d: %+v", d.wantGroup, d.wantSeq, rep.Problems)
			}
			t.Logf("%s\n\t%s", d.name, strings.Join(summary, "\n\t"))
		})
	}
}

// openDamaged opens the copy as `authority serve` does and reads every
// Group through the paths a reconnecting worker takes. It returns how the
// authority answered.
func openDamaged(t *testing.T, dir string, d damage, b damagedLog) string {
	s, err := Open(Config{Dir: dir, Clock: nil, Limits: testLimits(), OpenCheckEvents: 16})
	if err != nil {
		if ReasonOf(err) == "" {
			t.Errorf("Open: uncoded error %v", err)
		}
		if d.wantOpen != "" && ReasonOf(err) != d.wantOpen {
			t.Errorf("Open: reason %s, want %s (%v)", ReasonOf(err), d.wantOpen, err)
		}
		return "refused " + firstWords(err)
	}
	defer s.Close()
	if d.wantOpen != "" {
		t.Errorf("Open succeeded, want %s", d.wantOpen)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !s.BackgroundCheckDone() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	intact := true
	var answers []string
	for _, g := range []string{"grp-a", "grp-b"} {
		evs, err := s.Events(g, 0, 0)
		switch {
		case err != nil && ReasonOf(err) == ReasonStoreDamaged:
			intact = false
			answers = append(answers, g+" not served")
		case err != nil:
			t.Errorf("Events(%s): %v", g, err)
			intact = false
		default:
			same := len(evs) == len(b.events[g])
			for i := 0; same && i < len(evs); i++ {
				same = bytes.Equal(evs[i].Raw, b.events[g][i])
			}
			if !same {
				intact = false
				answers = append(answers, g+" served DIFFERENT events")
				t.Errorf("%s served %d events that differ from the %d stored", g, len(evs), len(b.events[g]))
			}
		}
	}
	if d.wantGroup != "" && s.integrity.damage(d.wantGroup) == nil {
		t.Errorf("%s is served after its event %d was damaged", d.wantGroup, d.wantSeq)
	}
	for _, g := range s.integrity.damagedGroups() {
		if e := s.integrity.damage(g); ReasonOf(e) != ReasonStoreDamaged {
			t.Errorf("damaged %s answers %v", g, e)
		}
	}
	// The Organization's events and a receipt lookup (every command's
	// first read) reach other pages.
	if _, err := s.OrgEvents(); err != nil {
		if ReasonOf(err) != ReasonStoreDamaged {
			t.Errorf("OrgEvents: %v", err)
		}
		intact = false
		answers = append(answers, "organization events not served")
	}
	s.receipts.get(owner, "act-none")
	if err := s.db.failed.Load(); err != nil {
		intact = false
		answers = append(answers, "log failed on a later read")
		// From then on every call fails fast with the coded error.
		for _, g := range []string{"grp-a", "grp-b"} {
			if _, err := s.Events(g, 0, 0); ReasonOf(err) != ReasonStoreDamaged {
				t.Errorf("Events(%s) after the log failed: %v", g, err)
			}
		}
		if _, err := s.OrgEvents(); ReasonOf(err) != ReasonStoreDamaged {
			t.Errorf("OrgEvents after the log failed: %v", err)
		}
	}
	if intact {
		return "served intact"
	}
	return "opened; " + strings.Join(answers, ", ")
}

func noPanic(t *testing.T, what string, fn func() string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			out = "PANIC"
		}
	}()
	return fn()
}

func namesProblem(rep storecheck.Report, g string, seq uint64) bool {
	for _, p := range rep.Problems {
		if p.GroupID == g && p.Sequence == seq {
			return true
		}
	}
	return false
}

func firstWords(err error) string {
	s := err.Error()
	if len(s) > 90 {
		s = s[:90] + "…"
	}
	return s
}

// flipAll changes one digit of every stored copy of raw in data and returns
// how many there were.
func flipAll(data, raw []byte) int {
	j := bytes.Index(raw, []byte(`"occurredAt":"20`))
	if j < 0 {
		return 0
	}
	n := 0
	for off := 0; ; {
		i := bytes.Index(data[off:], raw)
		if i < 0 {
			return n
		}
		at := off + i + j + len(`"occurredAt":"20`)
		data[at] = '0' + (data[at]-'0'+1)%10
		n++
		off += i + len(raw)
	}
}
