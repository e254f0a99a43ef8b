package authoritylite

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/httpapi"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

var _ httpapi.Backend = (*Service)(nil)

// routeKit is the svc fixture behind the HTTPS routes, plain http on
// loopback, with bob: a registered human who belongs to no Group.
type routeKit struct {
	*svc
	srv *httptest.Server
	h   *httpapi.Handler
	bob protocol.PrivateKey
	n   int
}

func newRouteKit(t *testing.T) *routeKit {
	k := &routeKit{svc: newSvc(t)}
	k.bob = mustKey(t, protocol.ActorHuman, "bob")
	if err := k.s.AddPrincipal(protocol.ActorHuman, "bob", k.bob.Public()); err != nil {
		t.Fatal(err)
	}
	k.h = httpapi.New(k.s)
	k.h.MaxArtifactBytes = 64
	k.srv = httptest.NewServer(k.h)
	t.Cleanup(k.srv.Close)
	return k
}

var bob = protocol.Actor{Kind: protocol.ActorHuman, ID: "bob"}

// req describes one request: who signs its proof and how.
type req struct {
	method, target string
	body           []byte
	actor          protocol.Actor
	key            protocol.PrivateKey
	proof          string // a literal header value; "" signs one, "-" sends none
	signTarget     string // the target the proof names, when not target
	signMethod     string
	at             time.Time // issuedAt; zero: now
	nonce          string
	token          *protocol.CapabilityToken
}

func (k *routeKit) nonce() string {
	k.n++
	return strings.Repeat("n", 16) + string(rune('a'+k.n%26)) + strings.Repeat("0", k.n/26)
}

func (k *routeKit) send(r req) (int, []byte) {
	k.t.Helper()
	hr, err := http.NewRequest(r.method, k.srv.URL+r.target, bytes.NewReader(r.body))
	if err != nil {
		k.t.Fatal(err)
	}
	switch r.proof {
	case "-":
	case "":
		at, target, method, nonce := r.at, r.signTarget, r.signMethod, r.nonce
		if at.IsZero() {
			at = k.clk.Now()
		}
		if target == "" {
			target = r.target
		}
		if method == "" {
			method = r.method
		}
		if nonce == "" {
			nonce = k.nonce()
		}
		h, err := protocol.SignRequest(r.actor, r.key, method, target, nonce, at)
		if err != nil {
			k.t.Fatal(err)
		}
		hr.Header.Set(protocol.RequestProofHeader, h)
	default:
		hr.Header.Set(protocol.RequestProofHeader, r.proof)
	}
	if r.token != nil {
		h, _ := protocol.EncodeDocumentHeader(r.token)
		hr.Header.Set(protocol.CapabilityHeader, h)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func codeOf(b []byte) protocol.Code {
	var e protocol.Error
	_ = json.Unmarshal(b, &e)
	return e.Code
}

// token is w1's capability token for its current lease of id.
func (k *routeKit) token(id string) *protocol.CapabilityToken {
	var tok *protocol.CapabilityToken
	for _, ev := range checkLog(k.t, k.s, "grp-a") {
		if ev.Type == protocol.EvtWorkStarted {
			var p group.Started
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				k.t.Fatal(err)
			}
			if p.WorkItemID == id {
				tok = p.CapabilityToken
			}
		}
	}
	if tok == nil {
		k.t.Fatalf("no work.started of %s", id)
	}
	return tok
}

// Every authentication and authorization check of the routes, each by a
// request that passes all the others.
func TestRoutesRefuse(t *testing.T) {
	k := newRouteKit(t)
	w := k.toActive("wi-1")
	published := k.publish("w1", w, []byte("published"))
	tok := k.token("wi-1")
	unpublished := protocol.Digest([]byte("stored, never published"))
	if _, err := k.s.PutArtifact([]byte("stored, never published")); err != nil {
		t.Fatal(err)
	}
	alice, akey := owner, k.alice.Key
	w1, w1key := agent("w1"), k.w["w1"].Key
	w2, w2key := agent("w2"), k.w["w2"].Key
	events := "/mwp/groups/grp-a/events?after=0"
	good := []byte("good bytes")
	goodPut := "/mwp/artifacts/" + protocol.Digest(good)
	expired := *tok
	reused := k.nonce()
	if st, b := k.send(req{method: "GET", target: events, actor: alice, key: akey, nonce: reused}); st != 200 {
		t.Fatalf("first use of a nonce: %d %s", st, b)
	}
	tests := []struct {
		name   string
		r      req
		status int
		code   protocol.Code
	}{
		{"no proof", req{method: "GET", target: events, proof: "-"}, 401, protocol.CodeAuthRequired},
		{"proof not base64url", req{method: "GET", target: events, proof: "%%%"}, 400, protocol.CodeProtocolViolation},
		{"proof not a document", req{method: "GET", target: events, proof: "e30"}, 400, protocol.CodeProtocolViolation},
		{"proof for another target", req{method: "GET", target: events, signTarget: "/mwp/session", actor: alice, key: akey}, 401, protocol.CodeAuthInvalidSignature},
		{"proof for another method", req{method: "GET", target: events, signMethod: "PUT", actor: alice, key: akey}, 401, protocol.CodeAuthInvalidSignature},
		{"stale proof", req{method: "GET", target: events, actor: alice, key: akey, at: t0.Add(-10 * time.Minute)}, 401, protocol.CodeAuthInvalidSignature},
		{"another principal's key", req{method: "GET", target: events, actor: alice, key: k.bob}, 401, protocol.CodeAuthInvalidSignature},
		{"unknown principal", req{method: "GET", target: events, actor: protocol.Actor{Kind: protocol.ActorHuman, ID: "mallory"}, key: mustKey(t, protocol.ActorHuman, "mallory")}, 401, protocol.CodeAuthInvalidSignature},
		{"reused nonce", req{method: "GET", target: events, actor: alice, key: akey, nonce: reused}, 401, protocol.CodeAuthInvalidSignature},
		{"events of a non-member", req{method: "GET", target: events, actor: bob, key: k.bob}, 404, protocol.CodeGroupNotFound},
		{"events of an unknown Group", req{method: "GET", target: "/mwp/groups/grp-zz/events", actor: alice, key: akey}, 404, protocol.CodeGroupNotFound},
		{"mission of a non-member", req{method: "GET", target: "/mwp/missions/mis-a", actor: bob, key: k.bob}, 404, protocol.CodeGroupNotFound},
		{"put by a principal of no Group", req{method: "PUT", target: goodPut, body: good, actor: bob, key: k.bob}, 403, protocol.CodeAuthForbidden},
		{"put with bytes of another digest", req{method: "PUT", target: goodPut, body: []byte("other"), actor: alice, key: akey}, 422, protocol.CodeInvalidCommand},
		{"put over the size limit", req{method: "PUT", target: "/mwp/artifacts/" + protocol.Digest(make([]byte, 65)), body: make([]byte, 65), actor: alice, key: akey}, 413, protocol.CodeProtocolViolation},
		{"put to a malformed digest", req{method: "PUT", target: "/mwp/artifacts/sha256:ABC", body: good, actor: alice, key: akey}, 400, protocol.CodeProtocolViolation},
		{"put with another agent's token", req{method: "PUT", target: goodPut, body: good, actor: w2, key: w2key, token: tok}, 403, protocol.CodeAuthForbidden},
		{"put with a forged token", req{method: "PUT", target: goodPut, body: good, actor: w1, key: w1key, token: func() *protocol.CapabilityToken {
			f := *tok
			f.ExpiresAt = protocol.NewTime(t0.Add(time.Hour))
			return &f
		}()}, 401, protocol.CodeAuthInvalidSignature},
		{"get of unpublished bytes", req{method: "GET", target: "/mwp/artifacts/" + unpublished, actor: alice, key: akey}, 404, protocol.CodeInvalidCommand},
		{"get by a non-member", req{method: "GET", target: "/mwp/artifacts/" + published, actor: bob, key: k.bob}, 404, protocol.CodeInvalidCommand},
		{"card of an unknown agent", req{method: "GET", target: "/mwp/agents/nobody/card", actor: bob, key: k.bob}, 404, protocol.CodeInvalidCommand},
		{"unknown route", req{method: "GET", target: "/mwp/nothing", proof: "-"}, 404, protocol.CodeProtocolViolation},
		{"command that is not JSON", req{method: "POST", target: "/mwp/commands", body: []byte("{"), proof: "-"}, 400, protocol.CodeProtocolViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := k.send(tt.r)
			if st != tt.status || codeOf(b) != tt.code {
				t.Fatalf("got %d %s, want %d %s", st, b, tt.status, tt.code)
			}
		})
	}
	// A token past its lease's expiry (the clock moved) is refused.
	k.clk.Advance(3 * time.Minute)
	if st, b := k.send(req{method: "PUT", target: goodPut, body: good, actor: w1, key: w1key, token: &expired}); st != 422 || codeOf(b) != protocol.CodeWorkLeaseExpired {
		t.Fatalf("expired token: %d %s", st, b)
	}
}

// The routes answer what they promise to a principal allowed to ask.
func TestRoutesServe(t *testing.T) {
	k := newRouteKit(t)
	w := k.toActive("wi-1")
	published := k.publish("w1", w, []byte("published"))
	alice, akey := owner, k.alice.Key
	st, b := k.send(req{method: "GET", target: "/mwp/session", actor: agent("w1"), key: k.w["w1"].Key})
	var s protocol.SessionInfo
	if err := json.Unmarshal(b, &s); st != 200 || err != nil || s.SessionEpoch != 1 || s.AgentCardHash == "" {
		t.Fatalf("session: %d %s", st, b)
	}
	st, b = k.send(req{method: "GET", target: "/mwp/groups/grp-a/events?after=2&max=3", actor: alice, key: akey})
	var page struct{ Events []protocol.Event }
	if err := json.Unmarshal(b, &page); st != 200 || err != nil || len(page.Events) != 3 || page.Events[0].Seq() != 3 {
		t.Fatalf("events: %d %s", st, b)
	}
	st, b = k.send(req{method: "GET", target: "/mwp/missions/mis-a", actor: alice, key: akey})
	if st != 200 || !bytes.Contains(b, []byte(`"groupId":"grp-a"`)) {
		t.Fatalf("mission: %d %s", st, b)
	}
	st, b = k.send(req{method: "GET", target: "/mwp/artifacts/" + published, actor: alice, key: akey})
	if st != 200 || string(b) != "published" {
		t.Fatalf("get artifact: %d %s", st, b)
	}
	st, b = k.send(req{method: "GET", target: "/mwp/artifacts/" + published, actor: agent("w1"), key: k.w["w1"].Key, token: k.token("wi-1")})
	if st != 200 || string(b) != "published" {
		t.Fatalf("get artifact with a token: %d %s", st, b)
	}
	for _, r := range []req{
		{method: "PUT", target: "/mwp/artifacts/" + protocol.Digest([]byte("by alice")), body: []byte("by alice"), actor: alice, key: akey},
		{method: "PUT", target: "/mwp/artifacts/" + protocol.Digest([]byte("by token")), body: []byte("by token"), actor: agent("w1"), key: k.w["w1"].Key, token: k.token("wi-1")},
	} {
		st, b = k.send(r)
		if st != 200 || !bytes.Contains(b, []byte(`"uri":"mwp-artifact:sha256:`)) {
			t.Fatalf("put: %d %s", st, b)
		}
		if _, err := k.s.Artifact(strings.TrimPrefix(r.target, "/mwp/artifacts/")); err != nil {
			t.Fatal(err)
		}
	}
	// The bytes w1 uploaded with its token, published by a command over
	// POST, are then readable by a member.
	upDigest := protocol.Digest([]byte("by token"))
	card, _ := k.s.AgentCard("w1")
	m := protocol.ArtifactManifest{ContentHash: upDigest, MediaType: "text/plain", Schema: protocol.ManifestSchema("", "text/plain"),
		Producer:  protocol.ArtifactProducer{AgentID: "w1", AgentVersion: card.AgentVersion, AgentCardHash: k.s.AgentCardHash("w1")},
		MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-1", SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{},
		CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len("by token")), URI: protocol.ArtifactURI(upDigest)}
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: k.w["w1"].Key.KeyID, CreatedAt: m.CreatedAt}
	signedManifest, err := protocol.SignedValue(m, k.w["w1"].Key)
	if err != nil || json.Unmarshal(signedManifest, &m) != nil {
		t.Fatal(err)
	}
	_, pub, err := k.w["w1"].Build(protocol.CmdArtifactPublish, "grp-a", &protocol.PublishArtifactPayload{Manifest: m,
		OwnershipEpoch: protocol.Uint64(w.Ownership.OwnershipEpoch), LeaseID: w.Lease.LeaseID})
	if err != nil {
		t.Fatal(err)
	}
	if st, b = k.send(req{method: "POST", target: "/mwp/commands", body: pub, proof: "-"}); st != 200 {
		t.Fatalf("artifact.publish of uploaded bytes: %d %s", st, b)
	}
	if st, b = k.send(req{method: "GET", target: "/mwp/artifacts/" + upDigest, actor: alice, key: akey}); st != 200 || string(b) != "by token" {
		t.Fatalf("get of the published upload: %d %s", st, b)
	}
	st, b = k.send(req{method: "GET", target: "/mwp/agents/w1/card", actor: bob, key: k.bob})
	if st != 200 || !bytes.Contains(b, []byte(`"agentId":"w1"`)) {
		t.Fatalf("card: %d %s", st, b)
	}
	// A command over POST: the owner's message, then its byte-identical retry.
	_, raw, err := k.alice.Build(protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: "msg-1", ConversationID: "c-1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, b = k.send(req{method: "POST", target: "/mwp/commands", body: raw, proof: "-"})
		if st != 200 || !bytes.Contains(b, []byte(`"receipt":{"actionId"`)) {
			t.Fatalf("command: %d %s", st, b)
		}
	}
}
