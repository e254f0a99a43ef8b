package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"sync"

	"filippo.io/edwards25519"
)

// Every inbound Command and Event is verified with one of a handful of
// keys, and crypto/ed25519 decompresses the public key's point on every
// call (a field square root, ~3 µs of a ~50 µs verification). The points
// are kept here instead, decoded once, and verification is crypto/ed25519's
// own (RFC 8032 §5.1.7 as Go implements it: cofactorless, S canonical, R
// compared by its encoding); TestVerifyEd25519MatchesStd and
// FuzzVerifyEd25519 hold the two equal.
//
// The cache is keyed by the key's bytes, not its keyId: a keyId that comes
// to name another key (a rotation, a re-enrolment) can never be checked
// against the old point. Only keys a KeyResolver returned reach it, so it
// holds the principals' keys; past maxPoints it starts over.

const maxPoints = 4096

var points = struct {
	sync.RWMutex
	m map[[ed25519.PublicKeySize]byte]*edwards25519.Point // −A, ready for the check
}{m: map[[ed25519.PublicKeySize]byte]*edwards25519.Point{}}

// negPoint returns −A for the public key pub, decoded once; nil when pub
// is not a point (crypto/ed25519 then refuses every signature).
func negPoint(pub ed25519.PublicKey) *edwards25519.Point {
	k := [ed25519.PublicKeySize]byte(pub)
	points.RLock()
	p, ok := points.m[k]
	points.RUnlock()
	if ok {
		return p
	}
	if a, err := new(edwards25519.Point).SetBytes(pub); err == nil {
		p = new(edwards25519.Point).Negate(a)
	}
	points.Lock()
	if len(points.m) >= maxPoints {
		clear(points.m)
	}
	points.m[k] = p
	points.Unlock()
	return p
}

// verifyEd25519 is ed25519.Verify(pub, msg, sig) with pub's point cached.
// pub must be ed25519.PublicKeySize bytes long.
func verifyEd25519(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	minusA := negPoint(pub)
	if minusA == nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	var d [sha512.Size]byte
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(d[:0]))
	if err != nil {
		return false
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	var r edwards25519.Point
	r.VarTimeDoubleScalarBaseMult(k, minusA, s)
	return bytes.Equal(sig[:32], r.Bytes())
}
