package authoritylite

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// pipelineCases are the runs of BenchmarkPipeline: one Group shared by
// 1, 8 and 64 concurrent submitters, and 8 Groups with 8 submitters each.
// Group commit needs concurrency to batch: with fsync-bound appends,
// receipts per second grow with the commands in flight.
var pipelineCases = []struct{ groups, clients int }{{1, 1}, {1, 8}, {1, 64}, {8, 64}}

// BenchmarkPipeline measures accepted commands/s through the whole
// pipeline (verify, validate, decide, signed events, durable append with
// group commit) against two floors measured in the same run: the crypto
// floor (verify the command, sign one event of the same size, with the
// same number of clients) and, with 64 clients, raw bbolt appends of the
// same bytes through db.Batch. The pipeline and the crypto floor run in
// alternating chunks of the same commands, so a shared machine's load
// weighs on both alike; cpu_us/cmd is the process's CPU time per command
// in each. Ratios are reported as metrics; nothing here asserts a time.
func BenchmarkPipeline(b *testing.B) {
	const chunk = 500
	for _, tc := range pipelineCases {
		b.Run(fmt.Sprintf("groups=%d/clients=%d", tc.groups, tc.clients), func(b *testing.B) {
			groups, clients := tc.groups, tc.clients
			cmds, s, cleanup := benchCommands(b, groups, b.N)
			// Split each Group's commands among clients/groups submitters.
			defer cleanup()
			b.ResetTimer()
			per := clients / groups
			var pipeline, cryptoDur, pipeCPU, cryptoCPU time.Duration
			tx0 := lastTxID(s)
			for from := 0; from < len(cmds[0]); from += chunk {
				part := make([][][]byte, groups)
				for g := range cmds {
					part[g] = cmds[g][from:min(from+chunk, len(cmds[g]))]
				}
				start, cpu := time.Now(), processCPU()
				runParallel(clients, (len(part[0])+per-1)/per, func(c, i int) {
					g, idx := c%groups, i*per+c/groups
					if idx >= len(part[g]) {
						return
					}
					if _, err := s.Submit(context.Background(), "", part[g][idx]); err != nil {
						b.Error(err)
					}
				})
				pipeline += time.Since(start)
				pipeCPU += processCPU() - cpu
				b.StopTimer()
				cpu = processCPU()
				cryptoDur += cryptoFloor(b, s, part, clients)
				cryptoCPU += processCPU() - cpu
				b.StartTimer()
			}
			b.StopTimer()
			n := float64(groups * len(cmds[0]))
			b.ReportMetric(n/float64(lastTxID(s)-tx0), "cmds/commit")
			b.ReportMetric(n/pipeline.Seconds(), "cmds/s")
			b.ReportMetric(cryptoDur.Seconds()/pipeline.Seconds(), "x_crypto_floor")
			b.ReportMetric(float64(pipeCPU.Microseconds())/n, "cpu_us/cmd")
			b.ReportMetric(float64(cryptoCPU.Microseconds())/n, "floor_cpu_us/cmd")
			if clients == 64 {
				boltDur := boltFloor(b, cmds, clients)
				b.ReportMetric(boltDur.Seconds()/pipeline.Seconds(), "x_bolt_batch")
			}
		})
	}
}

// lastTxID is the id of the log's last committed transaction.
func lastTxID(s *Service) uint64 {
	var id uint64
	_ = s.db.bolt.View(func(tx *bolt.Tx) error { id = uint64(tx.ID()); return nil })
	return id
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCommands opens a Service with `groups` Groups and signs n
// message.post commands per Group by the owner.
func benchCommands(b *testing.B, groups, n int) ([][][]byte, *Service, func()) {
	return benchCommandsOn(b, groups, n, nil)
}

// benchCommandsOn is benchCommands with the log on tree (nil:
// authority.db).
func benchCommandsOn(b *testing.B, groups, n int, tree logstore.Tree) ([][][]byte, *Service, func()) {
	b.Helper()
	clk := clock.NewFake(t0)
	s, err := Open(Config{Dir: b.TempDir(), Clock: clk, Key: mustKey(b, protocol.ActorService, "authority-1"), RateBurst: 1 << 30, RateEvery: time.Nanosecond, Store: tree})
	if err != nil {
		b.Fatal(err)
	}
	hk := mustKey(b, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		b.Fatal(err)
	}
	p := s.Principal(owner, hk)
	cmds := make([][][]byte, groups)
	for g := range groups {
		gid := fmt.Sprintf("grp-%d", g)
		if _, err := p.Do(context.Background(), protocol.CmdMissionCreate, gid, &protocol.CreateMissionPayload{MissionID: "mis-" + gid, Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			_, raw, err := p.Build(protocol.CmdMessagePost, gid, &protocol.PostMessagePayload{MessageID: fmt.Sprintf("m-%d", i), ConversationID: "c", Text: "progress note number " + fmt.Sprint(i)})
			if err != nil {
				b.Fatal(err)
			}
			cmds[g] = append(cmds[g], raw)
		}
	}
	return cmds, s, func() { s.Close() }
}

func runParallel(groups, n int, fn func(g, i int)) {
	var wg sync.WaitGroup
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				fn(g, i)
			}
		}()
	}
	wg.Wait()
}

// split lists every command once, split among the clients.
func split(cmds [][][]byte, clients int) [][][]byte {
	out := make([][][]byte, clients)
	n := 0
	for _, g := range cmds {
		for _, c := range g {
			out[n%clients] = append(out[n%clients], c)
			n++
		}
	}
	return out
}

// cryptoFloor verifies each command and signs one event-sized document,
// with the same parallelism.
func cryptoFloor(b *testing.B, s *Service, cmds [][][]byte, clients int) time.Duration {
	priv := s.key
	work := split(cmds, clients)
	start := time.Now()
	runParallel(clients, len(work[0]), func(g, i int) {
		if i >= len(work[g]) {
			return
		}
		raw := work[g][i]
		doc, err := protocol.Parse(raw, protocol.DecodeOptions{})
		if err != nil {
			b.Error(err)
			return
		}
		// crypto/ed25519's own verification, which decodes the key every
		// time: the floor does not move with the protocol's key cache.
		m := doc.(map[string]any)
		input, err := protocol.SigningInput(m)
		if err != nil {
			b.Error(err)
			return
		}
		sig, _ := m["signature"].(map[string]any)
		keyID, _ := sig["keyId"].(string)
		value, _ := sig["value"].(string)
		pub, ok := s.org.PublicKey(keyID)
		raw64, derr := base64.RawURLEncoding.DecodeString(value)
		if !ok || derr != nil || !ed25519.Verify(pub, input, raw64) {
			b.Errorf("the floor's verification failed for key %q", keyID)
		}
		_ = ed25519.Sign(priv.Key, raw)
	})
	return time.Since(start)
}

// boltFloor appends the same bytes to a fresh bbolt file through db.Batch
// from the same number of clients, fsync on.
func boltFloor(b *testing.B, cmds [][][]byte, clients int) time.Duration {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	work := split(cmds, clients)
	start := time.Now()
	runParallel(clients, len(work[0]), func(g, i int) {
		if i >= len(work[g]) {
			return
		}
		err := db.Batch(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprint(g)))
			if err != nil {
				return err
			}
			return bk.Put(seqKey(uint64(i+1)), work[g][i])
		})
		if err != nil {
			b.Error(err)
		}
	})
	return time.Since(start)
}
