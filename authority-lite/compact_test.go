package authoritylite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/storecheck"
)

// TestCompactLogReopens: a compacted log opens again (its head file
// follows the copy's new transaction ids), serves the same events, and
// checks sound; a crash after the head was rewritten but before the swap
// leaves the old log, which opens too. Swapping without rewriting the head
// would be taken for a rolled-back log.
func TestCompactLogReopens(t *testing.T) {
	cases := []struct {
		name       string
		compact    func(path string) error
		wantReason string
	}{
		{"compacted", func(path string) error { _, err := CompactLog(path, time.Second); return err }, ""},
		{"crash before the swap", func(path string) error {
			_, err := storecheck.CompactFile(path, time.Second, func(tmp string) error {
				if err := compactHead(filepath.Dir(path), tmp); err != nil {
					return err
				}
				return errors.New("power lost")
			})
			if err == nil {
				return errors.New("the failing swap succeeded")
			}
			return nil
		}, ""},
		{"swap without the head", func(path string) error {
			_, err := storecheck.CompactFile(path, time.Second, nil)
			return err
		}, ReasonLogRolledBack},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			for i := range 8 {
				k.toActive(fmt.Sprintf("wi-%d", i))
			}
			if _, err := k.s.Compact("grp-a", 4); err != nil {
				t.Fatal(err)
			}
			first := k.s.peekGroup("grp-a").first
			want, err := k.s.Events("grp-a", first-1, 0)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(k.dir, LogFile)
			k.s.Close()
			if err := tc.compact(path); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits()})
			if tc.wantReason != "" {
				if ReasonOf(err) != tc.wantReason {
					t.Fatalf("Open: %v, want %s", err, tc.wantReason)
				}
				k.s = openAfterHeadRemoved(t, k)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k.rebind(s)
			got, err := s.Events("grp-a", first-1, 0)
			if err != nil || len(got) != len(want) || string(got[len(got)-1].Raw) != string(want[len(want)-1].Raw) {
				t.Fatalf("events after compaction: %v, %d of %d", err, len(got), len(want))
			}
			k.toActive("wi-after")
		})
	}
}

// openAfterHeadRemoved opens k's log as an operator who restored it on
// purpose would: without its head file.
func openAfterHeadRemoved(t *testing.T, k *svc) *Service {
	t.Helper()
	if err := os.Remove(headPath(k.dir)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
