package poc

import (
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// projectStore plays a worker's store: it applies every event of groups to
// a queue store in DIR, each batch delivered twice (a duplicate delivery
// the store must drop), and closes it.
func projectStore(t *testing.T, r *rig, dir string, groups ...string) {
	t.Helper()
	s, err := queue.Open(dir, queue.Options{NoSocket: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, g := range groups {
		evs, err := r.svc.Events(g, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var batch []queue.Incoming
		for _, se := range evs {
			in, err := queue.Decode(se.Raw)
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, in)
		}
		for i := 0; i < 2; i++ {
			res, err := s.Apply(batch)
			if err != nil || len(res.Rejected) > 0 {
				t.Fatalf("apply %d: %v %+v", i, err, res.Rejected)
			}
			if i == 1 && len(res.Duplicates) != len(batch) {
				t.Fatalf("redelivery: %d duplicates of %d", len(res.Duplicates), len(batch))
			}
		}
	}
}

// editedLog is the authority's log with a hand-made change to one Group.
type editedLog struct {
	EventLog
	group string
	edit  func([]wss.StoredEvent) []wss.StoredEvent
}

func (l editedLog) Events(g string, after uint64, max int) ([]wss.StoredEvent, error) {
	evs, err := l.EventLog.Events(g, after, max)
	if err == nil && g == l.group {
		evs = l.edit(evs)
	}
	return evs, err
}

// rewrite re-marshals the first event of type typ with edit applied (its
// signature no longer verifies, which only CheckSequences looks at).
func rewrite(t *testing.T, typ protocol.EventType, edit func(*protocol.Event)) func([]wss.StoredEvent) []wss.StoredEvent {
	return func(evs []wss.StoredEvent) []wss.StoredEvent {
		out := append([]wss.StoredEvent(nil), evs...)
		for i, se := range out {
			var ev protocol.Event
			mustJSON(t, se.Raw, &ev)
			if ev.Type != typ {
				continue
			}
			edit(&ev)
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			out[i].Raw = raw
			return out
		}
		t.Fatalf("no %s event", typ)
		return nil
	}
}

// TestInvariants checks every invariant on a real run of both missions,
// then breaks each store by hand and expects the matching check to fail.
func TestInvariants(t *testing.T) {
	r, a, b := runBoth(t)
	w1, w2 := filepath.Join(r.dir, "w1"), filepath.Join(r.dir, "w2")
	projectStore(t, r, w1, a.GroupID, b.GroupID)
	projectStore(t, r, w2, a.GroupID)
	st := RunStores{Log: r.svc, Missions: []MissionSpec{a, b}, Workers: map[string]string{"w1": w1, "w2": w2}, Effects: filepath.Join(r.dir, EffectsFile)}
	r.effects.Close() // the run is over: the checks open the log read-only
	for _, inv := range CheckInvariants(st) {
		if !inv.Held || inv.Detail == "" {
			t.Errorf("%s: %s", inv.Name, inv.Detail)
		}
	}
	groups := []string{a.GroupID, b.GroupID}

	t.Run("sequence gap", func(t *testing.T) {
		log := editedLog{r.svc, a.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent { return append(evs[:3:3], evs[4:]...) }}
		wantBroken(t, CheckSequences(log, groups), "sequence")
	})
	t.Run("bad signature", func(t *testing.T) {
		log := editedLog{r.svc, b.GroupID, rewrite(t, protocol.EvtWorkSubmitted, func(ev *protocol.Event) { ev.CorrelationID = "forged" })}
		wantBroken(t, CheckSequences(log, groups), "signature")
	})
	t.Run("stale owner completes", func(t *testing.T) {
		log := editedLog{r.svc, a.GroupID, rewrite(t, protocol.EvtWorkSubmitted, func(ev *protocol.Event) {
			var p map[string]any
			mustJSON(t, ev.Payload, &p)
			p["ownership"].(map[string]any)["ownershipEpoch"] = 0
			ev.Payload, _ = json.Marshal(p)
		})}
		wantBroken(t, CheckNoStaleCompletion(log, groups), "without the current grant")
	})
	t.Run("result after a new offer", func(t *testing.T) {
		// A fresh offer (no owner) slipped between submission and review.
		log := editedLog{r.svc, a.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent {
			out := append([]wss.StoredEvent(nil), evs...)
			var offer wss.StoredEvent
			for _, se := range out {
				if se.Type == protocol.EvtWorkOfferCreated {
					offer = se
					break
				}
			}
			for i, se := range out {
				if se.Type == protocol.EvtWorkResultAccepted {
					return append(out[:i:i], append([]wss.StoredEvent{offer}, out[i:]...)...)
				}
			}
			return out
		}}
		wantBroken(t, CheckNoStaleCompletion(log, groups), "accepted without a current submission")
	})
	t.Run("second effect under a key", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), EffectsFile)
		copyFile(t, st.Effects, path)
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bktEffects)
			_, v := b.Cursor().First()
			var e Effect
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			e.Seq = 2
			raw, _ := json.Marshal(e)
			return b.Put(u64key(2), raw)
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantBroken(t, CheckEffectsOnce(path), "has effects 1 and 2")
	})
	t.Run("event applied twice", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "w")
		projectStore(t, r, dir, b.GroupID)
		db, err := bolt.Open(filepath.Join(dir, queue.FileName), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The first event stored again at the next sequence, cursor moved.
		err = db.Update(func(tx *bolt.Tx) error {
			gb := tx.Bucket([]byte("groups")).Bucket([]byte(b.GroupID))
			in := gb.Bucket([]byte("inbox"))
			_, first := in.Cursor().First()
			last, _ := in.Cursor().Last()
			next := binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(last)+1)
			if err := in.Put(next, first); err != nil {
				return err
			}
			return gb.Bucket([]byte("meta")).Put([]byte("cursor"), next)
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantBroken(t, CheckWorkerStores([]string{dir}), "applied at 1 and")
	})
	t.Run("mission not approved", func(t *testing.T) {
		log := editedLog{r.svc, b.GroupID, func(evs []wss.StoredEvent) []wss.StoredEvent { return evs[:len(evs)-1] }}
		wantBroken(t, CheckMissionsApproved(log, []MissionSpec{a, b}), "mis-b is \"awaiting_approval\"")
	})
	t.Run("no worker store", func(t *testing.T) {
		wantBroken(t, CheckWorkerStores([]string{t.TempDir()}), "no worker store")
	})
}

func wantBroken(t *testing.T, inv InvariantResult, detail string) {
	t.Helper()
	if inv.Held || !strings.Contains(inv.Detail, detail) {
		t.Fatalf("%s held=%v detail %q, want broken with %q", inv.Name, inv.Held, inv.Detail, detail)
	}
}
