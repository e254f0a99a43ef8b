// Package httpapi serves the authority's HTTPS routes (docs/wire.md "HTTPS
// routes") beside the WebSocket binding, on the same listener: commands,
// Group events with long-poll and the snapshots of a compacted log, the Group of a Mission, artifact bytes and
// Agent Cards, for clients that keep no connection or cannot HELLO
// (humans).
//
// Every request is authenticated by a signature: POST /mwp/commands by the
// command's own (signed, fresh, single-use actionId), every other route by
// a RequestProof in the MWP-Proof header (signed, fresh, single-use nonce,
// bound to the method and target). Authorization is the binding's: active
// membership, GROUP_NOT_FOUND for a Group one may not know. Every refusal
// is an Error object (the binding's wss.WireError form) with an HTTP status
// derived from its code; clients read the code, not the status.
package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// Backend is the Group Authority behind the routes; authority-lite's
// Service implements it. Every error is a *protocol.Error.
type Backend interface {
	Now() time.Time
	// AuthenticateRequest checks a decoded RequestProof for one request.
	AuthenticateRequest(p *protocol.RequestProof, doc map[string]any, method, target string) (protocol.Actor, error)
	Submit(ctx context.Context, peer string, raw []byte) (*protocol.Receipt, error)
	SessionEpoch(agentID string) uint64
	AuthorizeActor(a protocol.Actor, groupID string) error
	Events(groupID string, after uint64, max int) ([]wss.StoredEvent, error)
	Changed(groupID string, after uint64) <-chan struct{}
	// Snapshot returns a stored Group Snapshot document by its digest.
	Snapshot(ref protocol.SnapshotRef) ([]byte, error)
	MissionGroup(a protocol.Actor, missionID string) (string, error)
	MayPutArtifact(a protocol.Actor, tok *protocol.CapabilityToken) error
	PutArtifact(data []byte) (string, error)
	ReadArtifact(a protocol.Actor, tok *protocol.CapabilityToken, digest string) ([]byte, error)
	AgentCard(agentID string) (protocol.AgentCard, bool)
	AgentCardHash(agentID string) string
}

// Limits of the routes (docs/wire.md "Limits").
const (
	// MaxArtifactBytes is the largest artifact body PUT accepts.
	MaxArtifactBytes = 64 << 20
	// MaxEvents is the most events one events request returns.
	MaxEvents = 1024
	// MaxWait is the longest long-poll of an events request.
	MaxWait = 30 * time.Second
	// BodyTimeout bounds reading a request body.
	BodyTimeout = 60 * time.Second
)

// Handler serves the routes.
type Handler struct {
	b   Backend
	mux *http.ServeMux
	// MaxArtifactBytes bounds an artifact body (default the constant;
	// tests lower it).
	MaxArtifactBytes int64
}

// New returns the routes of b.
func New(b Backend) *Handler {
	h := &Handler{b: b, mux: http.NewServeMux(), MaxArtifactBytes: MaxArtifactBytes}
	h.mux.HandleFunc("POST /mwp/commands", h.command)
	h.mux.HandleFunc("GET /mwp/session", h.authed(h.session))
	h.mux.HandleFunc("GET /mwp/groups/{group}/events", h.authed(h.events))
	h.mux.HandleFunc("GET /mwp/groups/{group}/snapshots/{digest}", h.authed(h.snapshot))
	h.mux.HandleFunc("GET /mwp/missions/{mission}", h.authed(h.mission))
	h.mux.HandleFunc("PUT /mwp/artifacts/{digest}", h.authed(h.putArtifact))
	h.mux.HandleFunc("GET /mwp/artifacts/{digest}", h.authed(h.getArtifact))
	h.mux.HandleFunc("GET /mwp/agents/{agent}/card", h.authed(h.card))
	h.mux.HandleFunc("/mwp/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorStatus(w, http.StatusNotFound, protocol.Errorf(protocol.CodeProtocolViolation, "no route %s %s (docs/wire.md \"HTTPS routes\")", r.Method, r.URL.Path))
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// authed authenticates the request's proof before the route runs.
func (h *Handler) authed(route func(http.ResponseWriter, *http.Request, protocol.Actor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hdr := r.Header.Values(protocol.RequestProofHeader)
		if len(hdr) != 1 {
			writeError(w, protocol.Errorf(protocol.CodeAuthRequired, "send one %s header (docs/wire.md \"HTTPS routes\")", protocol.RequestProofHeader))
			return
		}
		p, doc, err := protocol.DecodeRequestProof(hdr[0])
		if err != nil {
			writeError(w, err)
			return
		}
		a, err := h.b.AuthenticateRequest(p, doc, r.Method, r.URL.RequestURI())
		if err != nil {
			writeError(w, err)
			return
		}
		route(w, r, a)
	}
}

// status maps an error code to an HTTP status; the body's code is what
// counts.
func status(c protocol.Code) int {
	switch c {
	case protocol.CodeAuthRequired, protocol.CodeAuthInvalidSignature:
		return http.StatusUnauthorized
	case protocol.CodeAuthForbidden:
		return http.StatusForbidden
	case protocol.CodeGroupNotFound:
		return http.StatusNotFound
	case protocol.CodeRateLimited, protocol.CodeBackpressure:
		return http.StatusTooManyRequests
	case protocol.CodeInternalError:
		return http.StatusInternalServerError
	case protocol.CodeProtocolViolation:
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// writeError answers err as an Error object, with the status its code
// maps to.
func writeError(w http.ResponseWriter, err error) { writeErrorStatus(w, 0, err) }

// writeErrorStatus is writeError with a status of its own (0: the code's).
func writeErrorStatus(w http.ResponseWriter, code int, err error) {
	e := wss.WireError(err, "", "")
	if code == 0 {
		code = status(e.Code)
	}
	if e.Code.Retryable() {
		secs := int64(1)
		if ms, ok := e.Details["retryAfterMs"].(int64); ok && ms > 1000 {
			secs = (ms + 999) / 1000
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	writeJSON(w, code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"code":"INTERNAL_ERROR","message":"internal error","retryable":true}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
