package authoritylite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestRestartTimeRatio measures how long an authority takes to restart
// with a short history and with a long one: the same active Groups, and
// in the long one as many more events in archived Groups (finished
// Missions, as archiving leaves them with retention off: every event
// still online). A restart is Open until it serves, and until its first
// background verification pass ends. Both logs were verified before they
// were closed (the marks are current), as a running authority's are.
//
// It runs only with MWP_RESTART_EVENTS=N set (N, the long history's
// events; 1000000 for docs/performance.md): building the long log signs N
// events. It prints the figures and asserts nothing about time.
func TestRestartTimeRatio(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MWP_RESTART_EVENTS"))
	if n == 0 {
		t.Skip("set MWP_RESTART_EVENTS=N to measure (docs/performance.md)")
	}
	const active, perGroup, runs = 10, 1000, 11
	key := mustKey(t, protocol.ActorService, "authority-1")
	short := buildHistory(t, key, active, perGroup, 0)
	long := buildHistory(t, key, active, perGroup, (n-active*perGroup)/perGroup)
	restart := func(dir string) (serve, verified time.Duration, st VerifyStats) {
		start := time.Now()
		s, err := Open(Config{Dir: dir, Key: key, Clock: clock.NewFake(t0), Limits: testLimits()})
		if err != nil {
			t.Fatal(err)
		}
		serve = time.Since(start)
		<-s.integrity.first
		verified = time.Since(start)
		st = s.VerifyStats()
		s.Close()
		return serve, verified, st
	}
	// Alternated, so a shared machine's load weighs on both alike.
	var ss, sv, ls, lv []time.Duration
	var sst, lst VerifyStats
	for range runs {
		a, b, st := restart(short)
		ss, sv, sst = append(ss, a), append(sv, b), st
		a, b, st = restart(long)
		ls, lv, lst = append(ls, a), append(lv, b), st
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	size := func(dir string) int64 { fi, _ := os.Stat(filepath.Join(dir, LogFile)); return fi.Size() }
	t.Logf("short: %d events, %d Groups, %d MiB: serving after %v, verified after %v (median of %d), verified %+v",
		active*perGroup, active, size(short)>>20, med(ss), med(sv), runs, sst)
	t.Logf("long:  %d events, %d Groups, %d MiB: serving after %v, verified after %v (median of %d), verified %+v",
		n, active+(n-active*perGroup)/perGroup, size(long)>>20, med(ls), med(lv), runs, lst)
	t.Logf("ratio long/short: serving %.2fx, verified %.2fx", float64(med(ls))/float64(med(ss)), float64(med(lv))/float64(med(sv)))
}

// buildHistory writes a log with `active` Groups of perGroup events
// (message posts through the pipeline) and `archived` finished, archived
// Groups of perGroup events each: one made through the pipeline, the rest
// its copies under other ids, every event signed again, written straight
// into the store. It closes the log with every mark current.
func buildHistory(t *testing.T, key protocol.PrivateKey, active, perGroup, archived int) string {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	cfg := Config{Dir: dir, Key: key, Clock: clk, Limits: testLimits(), NoSync: true, VerifyEvery: 1000 * time.Hour,
		RateBurst: 1 << 30, RateEvery: time.Nanosecond, CreateBurst: 1 << 30, CreateEvery: time.Nanosecond}
	if archived > 0 {
		cfg.ArchiveAfter = time.Hour
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := s.Principal(owner, hk)
	ctx := context.Background()
	fill := func(gid string, events int) {
		if _, err := alice.Do(ctx, protocol.CmdMissionCreate, gid, &protocol.CreateMissionPayload{MissionID: "mis-" + gid, Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; s.LastSequence(gid) < uint64(events); i += 8 {
					if _, err := alice.Do(ctx, protocol.CmdMessagePost, gid, &protocol.PostMessagePayload{MessageID: fmt.Sprintf("m-%d", i), ConversationID: "c", Text: "progress note number " + fmt.Sprint(i)}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	for g := range active {
		fill(fmt.Sprintf("grp-active-%03d", g), perGroup)
	}
	if archived > 0 {
		fill("grp-tmpl", perGroup-3)
		if _, err := alice.Do(ctx, protocol.CmdMissionCancel, "grp-tmpl", &protocol.CancelMissionPayload{MissionID: "mis-grp-tmpl", Reason: "done"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)
		if got := s.ArchiveDue(ctx); len(got) != 1 {
			t.Fatalf("archived %v", got)
		}
	}
	s.verifyPass(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if archived > 0 {
		cloneArchived(t, filepath.Join(dir, LogFile), key, "grp-tmpl", archived-1)
	}
	return dir
}

// cloneArchived copies Group tmpl's buckets n times under new ids, its
// events signed again, each copy's mark at its last event.
func cloneArchived(t *testing.T, path string, key protocol.PrivateKey, tmpl string, n int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	buckets := map[string][]kv{}
	if err := db.View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bucketGroups).Bucket([]byte(tmpl))
		return g.ForEachBucket(func(name []byte) error {
			return g.Bucket(name).ForEach(func(k, v []byte) error {
				buckets[string(name)] = append(buckets[string(name)], kv{bytes.Clone(k), bytes.Clone(v)})
				return nil
			})
		})
	}); err != nil {
		t.Fatal(err)
	}
	const batch = 20
	for from := 0; from < n; from += batch {
		ids := make([]string, 0, batch)
		for i := from; i < min(from+batch, n); i++ {
			ids = append(ids, fmt.Sprintf("grp-done-%06d", i))
		}
		// Sign outside the write transaction, two Groups at a time.
		signed := make([][]kv, len(ids))
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < len(ids); j += 2 {
					signed[j] = resign(t, buckets[string(bucketEvents)], tmpl, ids[j], key)
				}
			}()
		}
		wg.Wait()
		if err := db.Update(func(tx *bolt.Tx) error {
			for j, id := range ids {
				g, err := tx.Bucket(bucketGroups).CreateBucket([]byte(id))
				if err != nil {
					return err
				}
				if err := tx.Bucket(bucketReleased).Put([]byte(id), []byte{}); err != nil {
					return err
				}
				for name, kvs := range buckets {
					b, err := g.CreateBucket([]byte(name))
					if err != nil {
						return err
					}
					if name == string(bucketEvents) {
						kvs = signed[j]
					}
					for _, p := range kvs {
						v := bytes.ReplaceAll(p.v, []byte(tmpl), []byte(id))
						if name == string(bucketMeta) && bytes.Equal(p.k, keyVerified) {
							last := signed[j][len(signed[j])-1]
							v = encodeMark(seqFromKey(last.k), last.v)
						}
						if err := b.Put(p.k, v); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// kv is one stored pair.
type kv struct{ k, v []byte }

// resign is the template's events as Group id's, signed again.
func resign(t *testing.T, evs []kv, tmpl, id string, key protocol.PrivateKey) []kv {
	out := make([]kv, len(evs))
	for i, p := range evs {
		var ev protocol.Event
		if err := json.Unmarshal(bytes.ReplaceAll(p.v, []byte(tmpl), []byte(id)), &ev); err != nil {
			t.Error(err)
			return nil
		}
		ev.Signature = protocol.Signature{}
		raw, err := protocol.SignedEvent(&ev, key)
		if err != nil {
			t.Error(err)
			return nil
		}
		out[i] = kv{p.k, raw}
	}
	return out
}

// TestStoreSizeRetention measures the log's bytes per WorkItem (authorize,
// offer, accept, start, cancel) with retention off and on: the file, and
// the pages in use (bbolt reuses the rest). Only with MWP_SIZE_ITEMS=N.
func TestStoreSizeRetention(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MWP_SIZE_ITEMS"))
	if n == 0 {
		t.Skip("set MWP_SIZE_ITEMS=N to measure (docs/performance.md)")
	}
	for _, retain := range []uint64{0, 1000} {
		k := newSvc(t)
		k.s.Close()
		s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), RetainEvents: retain, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		k.rebind(s)
		for i := range n {
			id := fmt.Sprintf("wi-%d", i)
			k.toActive(id)
			k.ok(k.coord, protocol.CmdWorkCancel, &protocol.CancelWorkPayload{WorkItemID: id, Reason: "done"})
		}
		var used int64
		_ = s.db.bolt.View(func(tx *bolt.Tx) error {
			st := s.db.bolt.Stats()
			used = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(s.db.bolt.Info().PageSize)
			return nil
		})
		fi, _ := os.Stat(filepath.Join(k.dir, LogFile))
		t.Logf("retain %d: %d items, %d events: file %.1f KiB/item, pages in use %.1f KiB/item", retain, n, s.LastSequence("grp-a"),
			float64(fi.Size())/1024/float64(n), float64(used)/1024/float64(n))
	}
}
