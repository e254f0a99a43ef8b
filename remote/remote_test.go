package remote_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/embed"
	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/internal/tlstrust"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
)

var _ coordinator.Authority = (*remote.Authority)(nil)

func key(t *testing.T, kind protocol.ActorKind, id string) protocol.PrivateKey {
	k, err := protocol.GenerateKey(protocol.KeyIDFor(kind, id, "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type kit struct {
	t     *testing.T
	a     *embed.Authority
	alice protocol.PrivateKey
	coord protocol.PrivateKey
}

var (
	alice = protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	coord = protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}
)

// newKit starts an embedded authority (its HTTPS routes on the wss
// listener) that knows the human alice and the agent coord.
func newKit(t *testing.T) *kit {
	a, err := embed.Start(embed.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	k := &kit{t: t, a: a, alice: key(t, protocol.ActorHuman, "alice"), coord: key(t, protocol.ActorAgent, "coord")}
	if err := a.Service.AddPrincipal(protocol.ActorHuman, "alice", k.alice.Public()); err != nil {
		t.Fatal(err)
	}
	card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: "coord",
		Capabilities: protocol.List[protocol.Capability]{{ID: "mission.coordinate", Version: "1.0.0"}},
		Roles:        protocol.List[protocol.Role]{protocol.RoleCoordinator}, MaxConcurrency: 1}
	if err := a.Service.Principal(coord, k.coord).Join(context.Background(), card); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *kit) dial(actor protocol.Actor, key protocol.PrivateKey) (*remote.Authority, error) {
	url, pin := k.a.Endpoint()
	return remote.Dial(context.Background(), remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: actor, Key: key, AuthorityKeys: k.a.Keys()})
}

func (k *kit) submit(r *remote.Authority, key protocol.PrivateKey, typ protocol.CommandType, env protocol.Envelope, payload any) *protocol.Receipt {
	k.t.Helper()
	_, raw, err := protocol.BuildCommand(r.Actor(), key, typ, env, payload, time.Now())
	if err != nil {
		k.t.Fatal(err)
	}
	rec, err := r.Submit(context.Background(), raw)
	if err != nil {
		k.t.Fatalf("%s: %v", typ, err)
	}
	return rec
}

// A human drives a Mission over the routes: create, find its Group, read
// and wait for verified events, store and read bytes, read a card.
func TestHumanOverTheRoutes(t *testing.T) {
	k := newKit(t)
	ctx := context.Background()
	h, err := k.dial(alice, k.alice)
	if err != nil {
		t.Fatal(err)
	}
	if h.SessionEpoch() != 0 {
		t.Fatalf("a human's session epoch is %d", h.SessionEpoch())
	}
	k.submit(h, k.alice, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp:r.1_x"},
		&protocol.CreateMissionPayload{MissionID: "mis:r.1_x", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
	g, err := h.MissionGroup(ctx, "mis:r.1_x")
	if err != nil || g != "grp:r.1_x" {
		t.Fatalf("MissionGroup = %q, %v", g, err)
	}
	evs, err := h.Events(ctx, g, 0, 0)
	if err != nil || len(evs) != 2 || evs[0].Sequence != 1 || evs[1].Sequence != 2 {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	if one, err := h.Events(ctx, g, 1, 1); err != nil || len(one) != 1 || one[0].Sequence != 2 {
		t.Fatalf("Events(after 1, max 1) = %v, %v", one, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(ctx, g, 2) }()
	k.submit(h, k.alice, protocol.CmdMissionAssignCoordinator, protocol.Envelope{GroupID: g, MembershipEpoch: protocol.Uint64(1)},
		&protocol.AssignCoordinatorPayload{MissionID: "mis:r.1_x", AgentID: "coord", LeaseDurationMs: 3600000})
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := h.Wait(wctx, g, 1000); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v", err)
	}
	d, uri, err := h.PutArtifact(ctx, []byte("report"))
	if err != nil || d != protocol.Digest([]byte("report")) || uri != "mwp-artifact:"+d {
		t.Fatalf("PutArtifact = %s %s %v", d, uri, err)
	}
	// Stored is not published: reading needs a publication in a Group.
	if _, err := h.Artifact(ctx, d); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("Artifact of unpublished bytes = %v", err)
	}
	card, err := h.AgentCard(ctx, "coord")
	if err != nil || card.AgentID != "coord" {
		t.Fatalf("AgentCard = %+v, %v", card, err)
	}
	if _, err := h.MissionGroup(ctx, "mis-none"); protocol.CodeOf(err) != protocol.CodeGroupNotFound {
		t.Fatalf("MissionGroup of an unknown Mission = %v", err)
	}
}

// An agent learns its session epoch at Dial and can open a new session.
func TestAgentOpensASession(t *testing.T) {
	k := newKit(t)
	a, err := k.dial(coord, k.coord)
	if err != nil {
		t.Fatal(err)
	}
	before := a.SessionEpoch()
	if before != k.a.Service.SessionEpoch("coord") {
		t.Fatalf("SessionEpoch %d, authority has %d", before, k.a.Service.SessionEpoch("coord"))
	}
	got, err := a.OpenSession(context.Background())
	if err != nil || got != before+1 || a.SessionEpoch() != got || k.a.Service.SessionEpoch("coord") != got {
		t.Fatalf("OpenSession = %d, %v (was %d)", got, err, before)
	}
}

func TestDialRefused(t *testing.T) {
	k := newKit(t)
	url, pin := k.a.Endpoint()
	other := tlstrust.Pin([]byte("another certificate"))
	mallory := key(t, protocol.ActorHuman, "mallory")
	tests := []struct {
		name  string
		cfg   remote.Config
		check func(error) bool
	}{
		{"another pin", remote.Config{URL: url, Trust: remote.Trust{Pin: other}, Actor: alice, Key: k.alice, AuthorityKeys: k.a.Keys()},
			func(err error) bool { return errors.Is(err, tlstrust.ErrPinMismatch) }},
		{"unknown human", remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: protocol.Actor{Kind: protocol.ActorHuman, ID: "mallory"}, Key: mallory, AuthorityKeys: k.a.Keys()},
			func(err error) bool { return protocol.CodeOf(err) == protocol.CodeAuthInvalidSignature }},
		{"key of another principal", remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: alice, Key: mallory, AuthorityKeys: k.a.Keys()},
			func(err error) bool { return err != nil }},
		{"plain http", remote.Config{URL: "https://127.0.0.1:1/mwp", Actor: alice, Key: k.alice, AuthorityKeys: k.a.Keys()},
			func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := remote.Dial(context.Background(), tt.cfg); !tt.check(err) {
				t.Fatalf("Dial = %v", err)
			}
		})
	}
}

// Without the authority's keys, events are not read at all.
func TestEventsNeedKeys(t *testing.T) {
	k := newKit(t)
	url, pin := k.a.Endpoint()
	h, err := remote.Dial(context.Background(), remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: alice, Key: k.alice})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Events(context.Background(), "grp-r", 0, 0); err == nil {
		t.Fatal("Events without AuthorityKeys ran")
	}
}

// Events signed by another key than the configured authority's are refused.
func TestEventsVerified(t *testing.T) {
	k := newKit(t)
	url, pin := k.a.Endpoint()
	wrong := key(t, protocol.ActorService, "authority-1")
	h, err := remote.Dial(context.Background(), remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: alice, Key: k.alice,
		AuthorityKeys: protocol.NewKeySet(wrong.Public())})
	if err != nil {
		t.Fatal(err)
	}
	k.submit(h, k.alice, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp-r"},
		&protocol.CreateMissionPayload{MissionID: "mis-r", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
	if _, err := h.Events(context.Background(), "grp-r", 0, 0); protocol.CodeOf(err) != protocol.CodeAuthInvalidSignature {
		t.Fatalf("Events under the wrong key = %v", err)
	}
}

// Requests refused RATE_LIMITED (agents sharing an address share its
// limit) are made again once the refusal's retryAfterMs has passed, within
// RateLimitWait; past it, or with waiting off, the refusal is returned.
func TestRateLimitedRequestsWaited(t *testing.T) {
	a, err := embed.Start(embed.Config{Dir: t.TempDir(), Server: wss.Options{RouteBurst: 1, RouteEvery: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	k := &kit{t: t, a: a, alice: key(t, protocol.ActorHuman, "alice")}
	if err := a.Service.AddPrincipal(protocol.ActorHuman, "alice", k.alice.Public()); err != nil {
		t.Fatal(err)
	}
	url, pin := a.Endpoint()
	var logs bytes.Buffer
	for _, tc := range []struct {
		name string
		wait time.Duration
		ok   bool
	}{
		{name: "waited", ok: true},
		{name: "not waited", wait: -1},
		{name: "past the bound", wait: time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			var told []time.Duration
			r, err := remote.Dial(context.Background(), remote.Config{URL: url, Trust: remote.Trust{Pin: pin}, Actor: alice, Key: k.alice,
				AuthorityKeys: a.Keys(), RateLimitWait: tc.wait, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				RateLimited: func(d time.Duration) { told = append(told, d) }})
			if err != nil && tc.ok {
				t.Fatal(err)
			}
			var refused error
			// Until one was limited (a request slower than the refill is
			// not), within a bound.
			for i := 0; i < 20 && err == nil && refused == nil && !strings.Contains(logs.String(), "rate limited by"); i++ {
				_, refused = r.MissionGroup(context.Background(), "mis-none")
				var e *protocol.Error
				if errors.As(refused, &e) && e.Code == protocol.CodeGroupNotFound {
					refused = nil // the answer itself: the request went through
				}
			}
			if err == nil {
				err = refused
			}
			var e *protocol.Error
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.ok && !strings.Contains(logs.String(), "rate limited by the authority; waiting"):
				t.Fatalf("20 requests at a burst of 1 were never limited:\n%s", logs.String())
			case tc.ok && (len(told) != strings.Count(logs.String(), "rate limited by") || told[0] <= 0):
				t.Fatalf("RateLimited told of %v, the log has %d waits", told, strings.Count(logs.String(), "rate limited by"))
			case !tc.ok && len(told) != 0:
				t.Fatalf("RateLimited told of %v, with nothing waited out", told)
			case !tc.ok && (!errors.As(err, &e) || e.Code != protocol.CodeRateLimited):
				t.Fatalf("err %v, want RATE_LIMITED", err)
			}
		})
	}
}
