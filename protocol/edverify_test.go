package protocol

import (
	"crypto/ed25519"
	"encoding/hex"
	"runtime"
	"testing"
	"time"
)

// edCases are signatures crypto/ed25519 accepts and refuses for reasons of
// each kind: a changed message, a changed R or S, S not below the group
// order, the high bits of S, a key that is not a point, a small-order key.
func edCases(t testing.TB) []struct {
	name          string
	pub, msg, sig []byte
} {
	t.Helper()
	priv := seedKey(7)
	pub := priv.Public().(ed25519.PublicKey)
	msg := []byte(`{"a":1}`)
	sig := ed25519.Sign(priv, msg)
	with := func(f func(s []byte)) []byte {
		s := append([]byte(nil), sig...)
		f(s)
		return s
	}
	// S + L: the same point, a non-canonical scalar crypto/ed25519 refuses.
	order, _ := hex.DecodeString("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	plusL := with(func(s []byte) {
		var c uint16
		for i := range 32 {
			c += uint16(s[32+i]) + uint16(order[i])
			s[32+i] = byte(c)
			c >>= 8
		}
	})
	notPoint, _ := hex.DecodeString("0200000000000000000000000000000000000000000000000000000000000000")
	smallOrder, _ := hex.DecodeString("0100000000000000000000000000000000000000000000000000000000000000")
	return []struct {
		name          string
		pub, msg, sig []byte
	}{
		{"valid", pub, msg, sig},
		{"changed message", pub, []byte(`{"a":2}`), sig},
		{"changed R", pub, msg, with(func(s []byte) { s[0] ^= 1 })},
		{"changed S", pub, msg, with(func(s []byte) { s[40] ^= 1 })},
		{"S plus the order", pub, msg, plusL},
		{"high bits of S", pub, msg, with(func(s []byte) { s[63] |= 0x80 })},
		{"short signature", pub, msg, sig[:63]},
		{"key not a point", notPoint, msg, sig},
		{"small-order key, zero signature", smallOrder, msg, append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...)},
	}
}

func TestVerifyEd25519MatchesStd(t *testing.T) {
	for _, c := range edCases(t) {
		t.Run(c.name, func(t *testing.T) {
			want := ed25519.Verify(c.pub, c.msg, c.sig)
			// Twice: the first call decodes the point, the second reads it.
			for i := range 2 {
				if got := verifyEd25519(c.pub, c.msg, c.sig); got != want {
					t.Fatalf("call %d: %v, crypto/ed25519 says %v", i, got, want)
				}
			}
		})
	}
	if c := edCases(t)[0]; !verifyEd25519(c.pub, c.msg, c.sig) {
		t.Fatal("the valid case does not verify")
	}
}

// A key id that comes to name another key is checked against the new one:
// the cache is keyed by the key's bytes.
func TestVerifyEd25519KeyReplaced(t *testing.T) {
	old, next := seedKey(1), seedKey(2)
	msg := []byte("m")
	sig := ed25519.Sign(next, msg)
	if verifyEd25519(old.Public().(ed25519.PublicKey), msg, sig) {
		t.Fatal("the old key verified the new key's signature")
	}
	if !verifyEd25519(next.Public().(ed25519.PublicKey), msg, sig) {
		t.Fatal("the new key did not verify its signature")
	}
}

func seedKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = b
	return ed25519.NewKeyFromSeed(seed)
}

func FuzzVerifyEd25519(f *testing.F) {
	for _, c := range edCases(f) {
		f.Add(c.pub, c.msg, c.sig)
	}
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if len(pub) != ed25519.PublicKeySize {
			return
		}
		if got, want := verifyEd25519(pub, msg, sig), ed25519.Verify(pub, msg, sig); got != want {
			t.Fatalf("verify(%x, %x, %x) = %v, crypto/ed25519 says %v", pub, msg, sig, got, want)
		}
	})
}

// BenchmarkVerifyEd25519 reports the cached-point verification's thread CPU
// as a ratio of crypto/ed25519's, timed in alternating rounds.
func BenchmarkVerifyEd25519(b *testing.B) {
	priv := seedKey(3)
	pub := priv.Public().(ed25519.PublicKey)
	msg := make([]byte, 1200) // a WorkItem event's size
	sig := ed25519.Sign(priv, msg)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var std, cached time.Duration
	const round = 50
	for done := 0; done < b.N; done += round {
		t := threadCPU()
		for range round {
			ed25519.Verify(pub, msg, sig)
		}
		std += threadCPU() - t
		t = threadCPU()
		for range round {
			verifyEd25519(pub, msg, sig)
		}
		cached += threadCPU() - t
	}
	b.ReportMetric(float64(cached)/float64(std), "x_std_verify")
}
