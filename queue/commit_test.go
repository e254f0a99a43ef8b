package queue

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

func outboxIDsOf(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	for e, err := range s.Outbox() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ActionID)
	}
	return ids
}

func put(t *testing.T, id, typ string) OutboxPut {
	t.Helper()
	p, err := NewOutboxPut(command(id, typ))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// One turn of the session loop (events, Commands to record, answered
// Commands) is one transaction, whatever it holds; work that changes
// nothing on disk opens none; a failed transaction leaves all of it out,
// also after reopening.
func TestCommitIsOneTransaction(t *testing.T) {
	st := randomStream("g", 30, rand.New(rand.NewPCG(3, 4)))
	dir := t.TempDir()
	s := openTest(t, dir, fast)
	if err := s.PutOutbox("act-old", command("act-old", "work.accept_offer")); err != nil {
		t.Fatal(err)
	}
	base := s.commits.Load()
	half := len(st.evs) / 2
	for _, tc := range []struct {
		name    string
		b       Batch
		commits int64
		refused []string
		outbox  []string
	}{
		{"events, puts and an answer", Batch{Events: st.evs[:half], Puts: []OutboxPut{put(t, "act-1", "work.start"), put(t, "act-2", "work.submit")}, Answered: []string{"act-old"}},
			1, nil, []string{"act-1", "act-2"}},
		{"an answer the outbox no longer holds", Batch{Answered: []string{"act-old"}}, 0, nil, []string{"act-1", "act-2"}},
		{"the same Command again", Batch{Puts: []OutboxPut{put(t, "act-1", "work.start")}}, 0, nil, []string{"act-1", "act-2"}},
		{"other bytes under a used actionId", Batch{Puts: []OutboxPut{put(t, "act-2", "work.fail")}}, 0, []string{"act-2"}, []string{"act-1", "act-2"}},
		{"twice in one batch, other bytes", Batch{Puts: []OutboxPut{put(t, "act-3", "work.start"), put(t, "act-3", "work.fail")}, Answered: []string{"act-1"}},
			1, []string{"act-3"}, []string{"act-2", "act-3"}},
	} {
		before := s.commits.Load()
		res, err := s.Commit(tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.commits.Load() - before; got != tc.commits {
			t.Errorf("%s: %d transactions, want %d", tc.name, got, tc.commits)
		}
		var refused []string
		for _, r := range res.PutRefused {
			if r.Err.Code != protocol.CodeActionIDCollision {
				t.Errorf("%s: refusal %v", tc.name, r.Err)
			}
			refused = append(refused, r.ActionID)
		}
		if !slices.Equal(refused, tc.refused) {
			t.Errorf("%s: refused %v, want %v", tc.name, refused, tc.refused)
		}
		if got := outboxIDsOf(t, s); !slices.Equal(got, tc.outbox) {
			t.Errorf("%s: outbox %v, want %v", tc.name, got, tc.outbox)
		}
	}
	if got := s.commits.Load() - base; got != 2 {
		t.Errorf("%d transactions in all, want 2", got)
	}
	cursor := s.Cursor("g")
	if cursor != uint64(half) {
		t.Fatalf("cursor %d, want %d", cursor, half)
	}

	boom := errors.New("disk gone")
	s.failApply = func() error { return boom }
	if _, err := s.Commit(Batch{Events: st.evs[half:], Puts: []OutboxPut{put(t, "act-4", "work.start")}, Answered: []string{"act-2"}}); !errors.Is(err, boom) {
		t.Fatalf("Commit = %v, want the injected failure", err)
	}
	s.failApply = nil
	if err := s.AckOutbox("act-4"); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, s)
	s = openTest(t, dir, fast)
	defer s.Close()
	if c := s.Cursor("g"); c != cursor {
		t.Errorf("cursor %d after a failed commit and reopening, want %d", c, cursor)
	}
	if got, want := outboxIDsOf(t, s), []string{"act-2", "act-3"}; !slices.Equal(got, want) {
		t.Errorf("outbox %v after a failed commit and reopening, want %v", got, want)
	}
	// What reopening knows of the outbox still saves transactions.
	before := s.commits.Load()
	if _, err := s.Commit(Batch{Answered: []string{"act-1", "act-4"}}); err != nil {
		t.Fatal(err)
	}
	if s.commits.Load() != before {
		t.Errorf("a transaction for answers the reopened outbox does not hold")
	}
}
