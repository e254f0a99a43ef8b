package authoritylite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// helloFor is a HELLO of p's agent at its current session with a proof
// signed at issuedAt.
func helloFor(t testing.TB, s *Service, p *Principal, nonce string, issuedAt time.Time) *protocol.Hello {
	t.Helper()
	epoch := s.SessionEpoch(p.Actor.ID)
	proof := protocol.HelloProof{AgentID: p.Actor.ID, SessionEpoch: epoch, Nonce: nonce, IssuedAt: protocol.NewTime(issuedAt)}
	proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: p.Key.KeyID, CreatedAt: proof.IssuedAt}
	signed, err := protocol.SignedValue(proof, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(signed, &proof); err != nil {
		t.Fatal(err)
	}
	return &protocol.Hello{Type: protocol.FrameHello, FrameID: "h1", ProtocolVersions: []string{protocol.Version}, AgentID: p.Actor.ID, SessionEpoch: epoch, Proof: &proof}
}

func nonceCounts(t testing.TB, s *Service) (nonces, index int) {
	t.Helper()
	_ = s.db.bolt.View(func(tx *bolt.Tx) error {
		org := tx.Bucket(bucketOrg)
		nonces = org.Bucket(bucketNonces).Stats().KeyN
		if idx := org.Bucket(bucketNonceTimes); idx != nil {
			index = idx.Stats().KeyN
		}
		return nil
	})
	return nonces, index
}

// A replayed HELLO inside the freshness window is refused for its nonce,
// also after a restart; outside the window it is refused for freshness;
// the nonce is forgotten only once no proof carrying it can be fresh.
func TestHelloNonceWindow(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	w1 := k.w["w1"]
	skew := protocol.DefaultMaxSkew
	h := helloFor(t, k.s, w1, "nonce-aaaaaaaaaaaaaaaa", k.clk.Now())
	if _, err := k.s.Hello(ctx, h); err != nil {
		t.Fatal(err)
	}
	refusedAt := func(what, pointer string) {
		t.Helper()
		_, err := k.s.Hello(ctx, h)
		pe, ok := err.(*protocol.Error)
		if !ok || pe.Code != protocol.CodeAuthInvalidSignature || pe.Pointer != pointer {
			t.Fatalf("%s: %v, want AUTH_INVALID_SIGNATURE at %s", what, err, pointer)
		}
		t.Logf("%s: %v at %s", what, pe, pe.Pointer)
	}
	refusedAt("replay at once", "/proof/nonce")
	k.clk.Advance(skew) // the proof's last fresh instant
	refusedAt("replay at the edge of freshness", "/proof/nonce")

	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	w1.s = k.s
	refusedAt("replay after a restart", "/proof/nonce")

	k.clk.Advance(time.Second)
	refusedAt("replay past freshness", "/proof")

	// Past 2×skew of its acceptance the nonce goes with the next HELLO, and a
	// new proof may carry it again.
	k.clk.Advance(skew)
	if _, err := k.s.Hello(ctx, helloFor(t, k.s, w1, "nonce-bbbbbbbbbbbbbbbb", k.clk.Now())); err != nil {
		t.Fatal(err)
	}
	if n, idx := nonceCounts(t, k.s); n != 1 || idx != 1 {
		t.Fatalf("after pruning: %d nonces, %d index entries; want 1 and 1", n, idx)
	}
	if _, err := k.s.Hello(ctx, helloFor(t, k.s, w1, "nonce-aaaaaaaaaaaaaaaa", k.clk.Now())); err != nil {
		t.Fatalf("the nonce outside every window: %v", err)
	}
}

// A store written before the time index gets it at the first HELLO, from
// the nonces it holds: a nonce inside the window stays refused.
func TestHelloNonceIndexBuiltFromOldStore(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	h := helloFor(t, k.s, k.w["w1"], "nonce-cccccccccccccccc", k.clk.Now())
	if _, err := k.s.Hello(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := k.s.db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOrg).DeleteBucket(bucketNonceTimes) }); err != nil {
		t.Fatal(err)
	}
	k.s.Close()
	k.s = openSvc(t, k.dir, k.clk, k.akey)
	if _, err := k.s.Hello(ctx, h); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("replay on an old store: %v", err)
	}
	if n, idx := nonceCounts(t, k.s); n != 1 || idx != 1 {
		t.Fatalf("rebuilt index: %d nonces, %d entries", n, idx)
	}
}

// BenchmarkHelloNonces measures one HELLO (proof check and durable nonce
// write, fsync off to isolate the store's work) with 1k and with 100k
// nonces inside the window, and reports the ratio: bounded cost means a
// ratio near 1, where a scan of the bucket grows with it.
func BenchmarkHelloNonces(b *testing.B) {
	per := map[int]time.Duration{}
	for _, stored := range []int{1000, 100000} {
		k := newSvc(b)
		k.s.Close()
		s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		now := k.clk.Now()
		if err := s.db.Update(func(tx logstore.Tx) error {
			org := tx.Bucket(bucketOrg)
			nb := org.Bucket(bucketNonces)
			idx, err := nonceIndex(org, nb)
			if err != nil {
				return err
			}
			for i := range stored {
				key := []byte(fmt.Sprintf("w2\x00seed-%08d", i))
				if err := nb.Put(key, []byte(now.UTC().Format(time.RFC3339Nano))); err != nil {
					return err
				}
				if err := idx.Put(nonceTimeKey(now, key), nil); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		w1 := s.Principal(agent("w1"), k.w["w1"].Key)
		hellos := make([]*protocol.Hello, b.N)
		for i := range hellos {
			hellos[i] = helloFor(b, s, w1, fmt.Sprintf("nonce-%016d", i), now)
		}
		b.ResetTimer()
		t0 := time.Now()
		for _, h := range hellos {
			if _, err := s.Hello(context.Background(), h); err != nil {
				b.Fatal(err)
			}
		}
		per[stored] = time.Since(t0) / time.Duration(b.N)
		b.StopTimer()
		s.Close()
	}
	b.ReportMetric(float64(per[1000].Microseconds()), "us_at_1k")
	b.ReportMetric(float64(per[100000].Microseconds()), "us_at_100k")
	b.ReportMetric(float64(per[100000])/float64(per[1000]), "x_100k_vs_1k")
}

// A nonce is refused while its last use is within 2×skew, the boundary
// included, and taken again once it is older; a HELLO prunes every
// nonce older than that, however many (up to maxNoncePrune), and no
// other.
func TestHelloNonceReuseAtTheWindowEdge(t *testing.T) {
	k := newSvc(t)
	ctx := context.Background()
	w1 := k.w["w1"]
	skew := protocol.DefaultMaxSkew
	hello := func(nonce string) error {
		_, err := k.s.Hello(ctx, helloFor(t, k.s, w1, nonce, k.clk.Now()))
		return err
	}
	counts := func(what string, want int) {
		t.Helper()
		if n, idx := nonceCounts(t, k.s); n != want || idx != want {
			t.Fatalf("%s: %d nonces, %d index entries; want %d", what, n, idx, want)
		}
	}
	for _, n := range []string{"nonce-a", "nonce-b", "nonce-d"} {
		if err := hello(n + "-0000000000000000"); err != nil {
			t.Fatal(err)
		}
	}
	k.clk.Advance(2 * skew) // exactly 2×skew after their use: still kept
	if err := hello("nonce-c-0000000000000000"); err != nil {
		t.Fatal(err)
	}
	counts("at the edge of the window", 4)
	if err := hello("nonce-a-0000000000000000"); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("a nonce used exactly 2×skew ago, in a fresh proof: %v, want AUTH_INVALID_SIGNATURE", err)
	}
	k.clk.Advance(time.Second) // now older than 2×skew, not yet pruned
	if err := hello("nonce-a-0000000000000000"); err != nil {
		t.Fatalf("a nonce last used more than 2×skew ago: %v", err)
	}
	counts("after b and d were pruned", 2) // a (used again) and c
}
