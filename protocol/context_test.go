package protocol

import (
	"crypto/rand"
	"testing"
	"time"
)

func contextKey(t testing.TB, id string) PrivateKey {
	t.Helper()
	k, err := GenerateKey(KeyIDFor(ActorAgent, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestContextPackageSignature: a package verifies only as its generator
// signed it, at its own time, unchanged.
func TestContextPackageSignature(t *testing.T) {
	coord, other := contextKey(t, "coord-1"), contextKey(t, "w1")
	keys := NewKeySet(coord.Public(), other.Public())
	base := typesContextPackage()
	base.Generator.AgentID = "coord-1"
	signed, err := SignContextPackage(base, coord)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(p ContextPackage) ContextPackage
		at   string // "" valid
	}{
		{"as signed", func(p ContextPackage) ContextPackage { return p }, ""},
		{"a decision added", func(p ContextPackage) ContextPackage {
			p.Decisions = append(List[Decision]{{Summary: "x", EventIDs: List[string]{}}}, p.Decisions...)
			return p
		}, "/signature/value"},
		{"scope moved", func(p ContextPackage) ContextPackage { p.Scope.MissionID = "mis-b"; return p }, "/signature/value"},
		{"previous version swapped", func(p ContextPackage) ContextPackage {
			p.PreviousVersion = &PackageVersionRef{Version: 1, Digest: Digest([]byte("x"))}
			return p
		}, "/signature/value"},
		{"another agent's key", func(p ContextPackage) ContextPackage {
			s, err := SignContextPackage(p, other)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, "/signature/keyId"},
		{"generatedAt moved", func(p ContextPackage) ContextPackage {
			p.GeneratedAt = NewTime(p.GeneratedAt.Add(time.Second))
			return p
		}, "/signature/createdAt"},
		{"unknown key", func(p ContextPackage) ContextPackage {
			s, err := SignContextPackage(p, contextKey(t, "coord-1"))
			if err != nil {
				t.Fatal(err)
			}
			s.Signature.KeyID = "agent:coord-1#k2"
			return s
		}, "/signature/keyId"},
	}
	for _, tc := range cases {
		err := VerifyContextPackage(tc.edit(signed), keys)
		if tc.at == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		pe, ok := err.(*Error)
		if !ok || pe.Code != CodeAuthInvalidSignature || pe.Pointer != tc.at {
			t.Errorf("%s: got %v, want AUTH_INVALID_SIGNATURE at %s", tc.name, err, tc.at)
		}
	}
}

// TestContextDigest: the digest binds every member, the signature too.
func TestContextDigest(t *testing.T) {
	p := typesContextPackage()
	d1, err := ContextDigest(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Signature.Value = "B" + p.Signature.Value[1:]
	if d2, _ := ContextDigest(p); d2 == d1 {
		t.Fatal("the digest ignores the signature")
	}
}

func TestContextCovers(t *testing.T) {
	p := typesContextPackage() // grp-a, mis-a, wi-7
	for _, tc := range []struct {
		group, mission, item string
		edit                 func(*ContextPackage)
		at                   string
	}{
		{"grp-a", "mis-a", "wi-7", nil, ""},
		{"grp-a", "mis-a", "wi-8", func(p *ContextPackage) { p.Scope.WorkItemID = "" }, ""},
		{"grp-b", "mis-a", "wi-7", nil, "/scope/groupId"},
		{"grp-a", "mis-b", "wi-7", nil, "/scope/missionId"},
		{"grp-a", "mis-a", "wi-8", nil, "/scope/workItemId"},
		{"grp-a", "mis-a", "wi-7", func(p *ContextPackage) { p.SourceEvents.GroupID = "grp-b" }, "/sourceEvents/groupId"},
	} {
		q := p
		if tc.edit != nil {
			tc.edit(&q)
		}
		err := q.Covers(tc.group, tc.mission, tc.item)
		if tc.at == "" && err != nil || tc.at != "" && (CodeOf(err) != CodeInvalidCommand || err.(*Error).Pointer != tc.at) {
			t.Errorf("%s/%s/%s: %v, want %q", tc.group, tc.mission, tc.item, err, tc.at)
		}
	}
}

var contextSeeds = []string{
	`{"packageId":"ctx-1","version":1,"scope":{"missionId":"m","groupId":"g"},"sourceEvents":{"groupId":"g","fromSequence":1,"toSequence":2},"artifacts":[],"decisions":[],"constraints":[],"openQuestions":[],"generator":{"agentId":"c","agentVersion":"1"},"generatedAt":"2026-11-30T08:00:00Z","signature":{"alg":"Ed25519","keyId":"agent:c#k1","createdAt":"2026-11-30T08:00:00Z","value":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`,
	`{"packageId":"ctx-1","version":2,"scope":{"missionId":"m","groupId":"g"}}`,
	`{"packageId":"ctx-1","packageId":"ctx-2"}`,
	`[]`, `{"version":1e400}`,
}

func TestDecodeContextPackage(t *testing.T) {
	valid := contextSeeds[0]
	for _, tc := range []struct {
		name, doc string
		code      Code
	}{
		{"valid", valid, ""},
		{"version 2 without previousVersion", contextSeeds[1], CodeSchemaValidationFailed},
		{"duplicate member", contextSeeds[2], CodeProtocolViolation},
		{"not an object", `[]`, CodeSchemaValidationFailed},
		{"backward range", `{"packageId":"ctx-1","version":1,"scope":{"missionId":"m","groupId":"g"},"sourceEvents":{"groupId":"g","fromSequence":3,"toSequence":2},"artifacts":[],"decisions":[],"constraints":[],"openQuestions":[],"generator":{"agentId":"c","agentVersion":"1"},"generatedAt":"2026-11-30T08:00:00Z","signature":{"alg":"Ed25519","keyId":"agent:c#k1","createdAt":"2026-11-30T08:00:00Z","value":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`, CodeInvalidCommand},
	} {
		_, err := DecodeContextPackage([]byte(tc.doc), DecodeOptions{})
		if tc.code == "" && err != nil || tc.code != "" && CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
	}
}

// FuzzDecodeContextPackage: the decoder of packages from outside never
// panics, refuses with a code, and what it accepts has a forward range and
// re-encodes to a document it accepts again.
func FuzzDecodeContextPackage(f *testing.F) {
	for _, s := range contextSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeContextPackage(data, DecodeOptions{MaxBytes: 1 << 16, MaxDepth: 16})
		if err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if p.SourceEvents.FromSequence > p.SourceEvents.ToSequence {
			t.Fatalf("accepted a backward range %+v", p.SourceEvents)
		}
		again, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeContextPackage(again, DecodeOptions{}); err != nil {
			t.Fatalf("re-encoded package refused: %v\n%s", err, again)
		}
	})
}
