package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// fake accepts every proof as alice and knows one Group with one event.
type fake struct{}

var alice = protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}

func (fake) Now() time.Time { return time.Unix(1e9, 0) }
func (fake) AuthenticateRequest(p *protocol.RequestProof, _ map[string]any, method, target string) (protocol.Actor, error) {
	if p.Method != method || p.Target != target {
		return protocol.Actor{}, protocol.Errorf(protocol.CodeAuthInvalidSignature, "another request")
	}
	return p.Actor, nil
}
func (fake) Submit(context.Context, string, []byte) (*protocol.Receipt, error) {
	return &protocol.Receipt{ActionID: "act-1", Events: protocol.List[protocol.EventRef]{}}, nil
}
func (fake) SessionEpoch(string) uint64 { return 1 }
func (fake) Snapshot(protocol.SnapshotRef) ([]byte, error) {
	return nil, protocol.Errorf(protocol.CodeInvalidCommand, "no snapshot")
}
func (fake) AuthorizeActor(a protocol.Actor, g string) error {
	if a != alice || g != "grp-a" {
		return protocol.Errorf(protocol.CodeGroupNotFound, "group %s not found", g)
	}
	return nil
}
func (fake) Events(string, uint64, int) ([]wss.StoredEvent, error) {
	return []wss.StoredEvent{{Sequence: 1, Raw: []byte(`{"sequence":1}`)}}, nil
}
func (fake) Changed(string, uint64) <-chan struct{}                         { c := make(chan struct{}); close(c); return c }
func (fake) MissionGroup(protocol.Actor, string) (string, error)            { return "grp-a", nil }
func (fake) MayPutArtifact(protocol.Actor, *protocol.CapabilityToken) error { return nil }
func (fake) PutArtifact(data []byte) (string, error)                        { return protocol.Digest(data), nil }
func (fake) ReadArtifact(protocol.Actor, *protocol.CapabilityToken, string) ([]byte, error) {
	return nil, protocol.Errorf(protocol.CodeInvalidCommand, "not stored")
}
func (fake) AgentCard(string) (protocol.AgentCard, bool) { return protocol.AgentCard{}, false }
func (fake) AgentCardHash(string) string                 { return "" }

// FuzzRoutes sends arbitrary requests (method, target, headers, body) to
// the routes. Nothing panics, and every answer but a 200 (or the mux's
// redirect of an unclean path) is an Error object with a known code.
func FuzzRoutes(f *testing.F) {
	h := New(fake{})
	h.MaxArtifactBytes = 16
	for _, s := range []struct{ m, target, proof, cap, body string }{
		{"GET", "/mwp/session", "", "", ""},
		{"GET", "/mwp/groups/grp-a/events?after=1&max=2&waitMs=1", "", "", ""},
		{"GET", "/mwp/groups/grp-a/events?after=-1", "", "", ""},
		{"PUT", "/mwp/artifacts/sha256:" + protocol.Digest([]byte("x"))[7:], "", "e30", "x"},
		{"POST", "/mwp/commands", "-", "", `{"actionId":"a"}`},
		{"GET", "/mwp/agents/w1/card", "", "", ""},
		{"DELETE", "/mwp/x", "%%", "", ""},
	} {
		f.Add(s.m, s.target, s.proof, s.cap, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, proof, capHeader string, body []byte) {
		switch method {
		case "GET", "PUT", "POST", "DELETE":
		default:
			method = "GET"
		}
		if !strings.HasPrefix(target, "/mwp/") {
			target = "/mwp/" + target // the binding's mux hands only these to the routes
		}
		r, err := http.NewRequest(method, "http://authority"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		switch proof {
		case "-":
		case "":
			k := testKey(t)
			p, err := protocol.SignRequest(alice, k, method, r.URL.RequestURI(), "0123456789abcdef", time.Unix(1e9, 0))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set(protocol.RequestProofHeader, p)
		default:
			r.Header.Set(protocol.RequestProofHeader, proof)
		}
		if capHeader != "" {
			r.Header.Set(protocol.CapabilityHeader, capHeader)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusOK || (w.Code >= 300 && w.Code < 400 && w.Header().Get("Location") != "") {
			return // a path the mux cleans first (/mwp/./x) is redirected
		}
		var e protocol.Error
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !e.Code.Known() {
			t.Fatalf("%s %s answered %d %q", method, target, w.Code, w.Body.Bytes())
		}
	})
}
