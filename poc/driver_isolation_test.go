package poc

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	grp "github.com/missionweave/mwp-worker/group"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// tokenLog is an EventLog holding work.started events whose capability
// tokens a test shapes.
type tokenLog struct {
	key protocol.PrivateKey
	evs map[string][]wss.StoredEvent
}

func (l *tokenLog) Events(g string, _ uint64, _ int) ([]wss.StoredEvent, error) { return l.evs[g], nil }
func (l *tokenLog) PublicKey() protocol.VerifyingKey                            { return l.key.Public() }
func (l *tokenLog) LateResults() ([]group.LateResult, error)                    { return nil, nil }

func (l *tokenLog) started(t *testing.T, group, item, lease string, edit func(*protocol.CapabilityToken)) {
	t.Helper()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	ls := &protocol.ExecutionLease{LeaseID: lease, AgentID: "worker-1", SessionEpoch: 1, WorkItemID: item, OwnershipEpoch: 1,
		StartedAt: protocol.NewTime(now), Renewals: protocol.List[protocol.Time]{}, ExpiresAt: protocol.NewTime(now.Add(time.Minute))}
	tok := protocol.CapabilityToken{TokenID: "tok-" + lease, LeaseID: lease, AgentID: "worker-1", GroupID: group, WorkItemID: item, OwnershipEpoch: 1,
		AllowedTools: protocol.List[string]{}, AllowedOperations: protocol.List[string]{}, AllowedData: protocol.List[string]{},
		IssuedAt: ls.StartedAt, ExpiresAt: ls.ExpiresAt}
	if edit != nil {
		edit(&tok)
	}
	tok.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: l.key.KeyID, CreatedAt: tok.IssuedAt}
	raw, err := protocol.SignedValue(tok, l.key)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &tok)
	payload, _ := json.Marshal(grp.Started{WorkRef: grp.WorkRef{WorkItemID: item, State: protocol.WorkActive}, Lease: ls, CapabilityToken: &tok})
	ev, _ := json.Marshal(protocol.Event{EventID: "evt-" + lease, GroupID: group, Type: protocol.EvtWorkStarted, Payload: payload})
	l.evs[group] = append(l.evs[group], wss.StoredEvent{Sequence: uint64(len(l.evs[group]) + 1), Type: protocol.EvtWorkStarted, WorkItemID: item, Raw: ev})
}

func TestCheckCredentialScope(t *testing.T) {
	key, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, "authority-1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*protocol.CapabilityToken)
		want string // "" means the invariant holds
	}{
		{"scoped", nil, ""},
		{"token of another Group", func(tk *protocol.CapabilityToken) { tk.GroupID = "grp-b" }, "names grp-b"},
		{"outlives its lease", func(tk *protocol.CapabilityToken) { tk.ExpiresAt = protocol.NewTime(tk.ExpiresAt.Add(time.Hour)) }, "outlives"},
		{"bound to another lease", func(tk *protocol.CapabilityToken) { tk.LeaseID = "lease-other" }, "does not verify"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &tokenLog{key: key, evs: map[string][]wss.StoredEvent{}}
			l.started(t, "grp-a", "wi-1", "lease-1", tc.edit)
			r := checkCredentialScope(l, []string{"grp-a"})
			if tc.want == "" {
				if !r.Held {
					t.Fatalf("should hold: %s", r.Detail)
				}
				return
			}
			if r.Held || !strings.Contains(r.Detail, tc.want) {
				t.Fatalf("held %v, detail %q, want %q", r.Held, r.Detail, tc.want)
			}
		})
	}
	// A forged token (signed by another key) and a token shared by two runs.
	other, _ := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, "authority-1", "k1"), rand.Reader)
	l := &tokenLog{key: other, evs: map[string][]wss.StoredEvent{}}
	l.started(t, "grp-a", "wi-1", "lease-1", nil)
	l.key = key
	if r := checkCredentialScope(l, []string{"grp-a"}); r.Held {
		t.Fatal("token signed by another key accepted")
	}
	l = &tokenLog{key: key, evs: map[string][]wss.StoredEvent{}}
	l.started(t, "grp-a", "wi-1", "lease-1", nil)
	l.started(t, "grp-a", "wi-2", "lease-2", func(tk *protocol.CapabilityToken) { tk.TokenID = "tok-lease-1" })
	if r := checkCredentialScope(l, []string{"grp-a"}); r.Held {
		t.Fatalf("shared token accepted: %s", r.Detail)
	}
	if r := checkCredentialScope(&tokenLog{key: key, evs: map[string][]wss.StoredEvent{}}, []string{"grp-a"}); r.Held {
		t.Fatal("an empty log cannot show isolation")
	}
}
