package scheduler

import "testing"

// keyLess and vtLess decide by exact 128-bit products where the float keys
// tie: with a slot-ms total past 2^53 the floats cannot tell 1 ms apart.
func TestExactTieBreaks(t *testing.T) {
	const big = int64(1) << 60
	mk := func(id string, svc, w, est int64) *group {
		g := newGroup(id, nil)
		g.svc, g.weight = svc, w
		g.keySvc, g.keyWeight, g.keyEst = svc, w, est
		g.keyVT, g.keyVF = float64(svc)/float64(w), float64(svc+est)/float64(w)
		return g
	}
	for _, tc := range []struct {
		name string
		a, b *group
		key  bool // keyLess(a, b)
		vt   bool // vtLess(a, b)
	}{
		// Equal virtual starts; a's next run ends 1 ms sooner: a first.
		{"virtual finish decides", mk("g-b", big, 1, 1), mk("g-a", big, 1, 2), true, false},
		{"virtual finish decides, swapped", mk("g-a", big, 1, 2), mk("g-b", big, 1, 1), false, true},
		// Virtual times 1 ms apart, as floats equal: the exact one decides.
		{"virtual start decides", mk("g-b", big, 1, 0), mk("g-a", big+1, 1, 0), true, true},
		{"virtual start decides, swapped", mk("g-a", big+1, 1, 0), mk("g-b", big, 1, 0), false, false},
	} {
		if tc.a.keyVT != tc.b.keyVT || tc.a.keyVF != tc.b.keyVF {
			t.Fatalf("%s: the float keys must tie for this row", tc.name)
		}
		if got := keyLess(tc.a, tc.b); got != tc.key {
			t.Errorf("%s: keyLess = %v, want %v", tc.name, got, tc.key)
		}
		if got := vtLess(tc.a, tc.b); got != tc.vt {
			t.Errorf("%s: vtLess = %v, want %v", tc.name, got, tc.vt)
		}
	}
}

// vtCmp decides on the high words of the cross products when they differ
// (products of 2^64 and more).
func TestVtCmpHighWords(t *testing.T) {
	const s = int64(1) << 62
	if got := vtCmp(s, 8, s, 4); got != -1 { // s/8 < s/4: 2^64 against 2^65
		t.Errorf("vtCmp(2^62, 8, 2^62, 4) = %d, want -1", got)
	}
	if got := vtCmp(s, 4, s, 8); got != 1 {
		t.Errorf("vtCmp(2^62, 4, 2^62, 8) = %d, want 1", got)
	}
}
