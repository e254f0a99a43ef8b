package authoritylite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"
	"github.com/missionweave/mwp-worker/protocol"
)

// reopenMarked closes k's Service and opens it again with no periodic
// pass (the first one, past the marks, still runs), and waits for that
// first pass.
func (k *svc) reopenMarked() VerifyStats {
	k.t.Helper()
	if err := k.s.Close(); err != nil {
		k.t.Fatal(err)
	}
	s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour})
	if err != nil {
		k.t.Fatal(err)
	}
	k.rebind(s)
	<-s.integrity.first
	return s.VerifyStats()
}

// rebind points k and its principals at s.
func (k *svc) rebind(s *Service) {
	k.s = s
	for _, p := range append([]*Principal{k.alice, k.coord}, k.w["w1"], k.w["w2"]) {
		p.s = s
	}
}

// editLog changes the closed log of k with fn.
func (k *svc) editLog(fn func(tx logstore.Tx) error) {
	k.t.Helper()
	if err := k.s.Close(); err != nil {
		k.t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(k.dir, LogFile), 0o600, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	defer db.Close()
	if err := (boltlog.Tree{DB: db}).Update(fn); err != nil {
		k.t.Fatal(err)
	}
}

// TestRestartVerifiesOnlyWhatIsNew: once the background has verified the
// log, a restart verifies nothing at Open and nothing in the background;
// events appended since are verified, and only they.
func TestRestartVerifiesOnlyWhatIsNew(t *testing.T) {
	k := newSvc(t)
	for i := range 6 {
		k.toActive(fmt.Sprintf("wi-%d", i))
	}
	first := k.reopenMarked() // verifies what the first Service left unmarked
	if first.Background == 0 {
		t.Fatalf("the first restart verified nothing in the background: %+v", first)
	}
	st := k.reopenMarked()
	if st.AtOpen != 0 || st.Background != 0 || st.Mismatched != 0 {
		t.Fatalf("restart of a verified log: %+v, want nothing verified", st)
	}
	before := k.s.LastSequence("grp-a")
	k.toActive("wi-new")
	added := int64(k.s.LastSequence("grp-a") - before)
	st = k.reopenMarked()
	if st.AtOpen != added || st.Background != added || st.Mismatched != 0 {
		t.Fatalf("restart after %d new events: %+v, want them verified at Open and in the background", added, st)
	}
	if st = k.reopenMarked(); st.AtOpen != 0 || st.Background != 0 {
		t.Fatalf("the new events' mark was not recorded: %+v", st)
	}
}

// TestVerifyMarkMismatch: a mark that does not match the log (another
// digest, a sequence the log does not hold) makes the authority verify the
// Group from its first online event; other Groups keep their marks.
func TestVerifyMarkMismatch(t *testing.T) {
	cases := []struct {
		name string
		mark func(last uint64, v []byte) []byte
	}{
		{"digest differs", func(_ uint64, v []byte) []byte { w := bytes.Clone(v); w[len(w)-1] ^= 1; return w }},
		{"sequence past the log", func(last uint64, v []byte) []byte { return encodeMark(last+5, []byte("x")) }},
		{"truncated value", func(_ uint64, v []byte) []byte { return v[:8] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			for i := range 3 {
				k.toActive(fmt.Sprintf("wi-%d", i))
			}
			if _, err := k.alice.Do(context.Background(), protocol.CmdMissionCreate, "grp-b",
				&protocol.CreateMissionPayload{MissionID: "mis-b", Title: "Other", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
				t.Fatal(err)
			}
			k.reopenMarked()
			last := k.s.LastSequence("grp-a")
			k.editLog(func(tx logstore.Tx) error {
				gb, err := openGroupBuckets(tx, "grp-a", false)
				if err != nil {
					return err
				}
				return gb.meta.Put(keyVerified, tc.mark(last, gb.meta.Get(keyVerified)))
			})
			s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), VerifyEvery: 1000 * time.Hour, OpenCheckEvents: 4})
			if err != nil {
				t.Fatal(err)
			}
			k.rebind(s)
			<-s.integrity.first
			st := s.VerifyStats()
			if st.Mismatched != 1 || st.AtOpen != 4 || st.Background != int64(last) {
				t.Fatalf("%+v, want grp-a's %d events verified from scratch (4 at Open), grp-b's none", st, last)
			}
			if got := k.reopenMarked(); got.AtOpen != 0 || got.Background != 0 || got.Mismatched != 0 {
				t.Fatalf("after the pass from scratch: %+v, want a matching mark again", got)
			}
		})
	}
}

// TestVerifiedRegionDamageFoundByCheck: an event altered below the mark is
// not looked for at restart, and `authority check` finds it.
func TestVerifiedRegionDamageFoundByCheck(t *testing.T) {
	k := newSvc(t)
	for i := range 3 {
		k.toActive(fmt.Sprintf("wi-%d", i))
	}
	k.reopenMarked()
	evs, err := k.s.Events("grp-a", 2, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("event 3: %v", err)
	}
	raw := bytes.Clone(evs[0].Raw)
	if err := k.s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "altered")
	if err := os.CopyFS(dir, os.DirFS(k.dir)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LogFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if flipAll(data, raw) == 0 {
		t.Fatal("event 3 not found in the file")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := protocol.WriteKeyFiles(dir, "authority", k.akey); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !namesProblem(rep, "grp-a", 3) {
		t.Fatalf("check of a log altered below its mark: %+v", rep.Problems)
	}
	s, err := Open(Config{Dir: dir, Clock: k.clk, Limits: testLimits(), VerifyEvery: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	<-s.integrity.first
	st := s.VerifyStats()
	s.Close()
	if st.AtOpen != 0 || st.Background != 0 {
		t.Fatalf("restart: %+v, want the verified region left to `authority check`", st)
	}
	k.reopenMarked()
}
