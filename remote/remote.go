// Package remote is a Group Authority over the wire for clients that keep
// no worker store: coordinators, Mission owners, human approvers, tools.
// It speaks the authority's HTTPS routes on the binding's listener
// (docs/wire.md "HTTPS routes"), so it serves humans, who cannot HELLO,
// and agents alike, and implements coordinator.Authority's methods.
//
// Every request but a command carries a fresh RequestProof signed with
// Config.Key; a command is its own proof. Every event returned is verified
// with Config.AuthorityKeys; every artifact read is checked against its
// digest.
package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/internal/tlstrust"
	"github.com/missionweave/mwp-worker/protocol"
)

// Trust says how the authority's certificate is authenticated (a pin, a
// CA file, or the system roots).
type Trust = tlstrust.Trust

// Config says where the authority is and who is talking to it.
type Config struct {
	// URL is the binding's URL, wss://HOST:PORT/mwp (the routes are under
	// it, over https); ws:// only with AllowInsecureLoopback.
	URL                   string
	Trust                 Trust
	AllowInsecureLoopback bool
	// Actor and Key sign every request and command (an agent or a human).
	Actor protocol.Actor
	Key   protocol.PrivateKey
	// AuthorityKeys verifies events (the authority's authority.pub);
	// without it Events and Wait refuse to run (uploads need none).
	AuthorityKeys protocol.KeyResolver
	Clock         clock.Clock // default real time
	Logger        *slog.Logger
	// RateLimitWait bounds how long one request waits out RATE_LIMITED
	// answers; 0 means DefaultRateLimitWait, negative not at all.
	RateLimitWait time.Duration
	// RateLimited, when set, is told of every RATE_LIMITED answer waited
	// out, and how long the wait is: a load generator reports them.
	RateLimited func(wait time.Duration)
	// Patience, when its Grace is set, has every request (Dial's
	// included) wait out an outage — remote.Transient: refused, reset,
	// timed out, a 5xx or a retryable Error — for up to Grace with
	// jittered back-off (Retry), then return Unreachable (retryable
	// INTERNAL_ERROR). Every request is safe to make again: a command
	// resent with the same bytes gets its receipt, a read or a
	// content-addressed PUT changes nothing. Zero: one try.
	Patience Patience
	// Waiting, when set, is told of each wait Patience makes (Retry's
	// waiting: the tries so far, the wait, the failure).
	Waiting func(tries int, wait time.Duration, err error)
	// Reached, when set with Patience, is told of every request the
	// authority answered (a result or a refusal) and the tries it took,
	// 1 when it did not wait: with Waiting it tells when an outage began
	// and when it ended.
	Reached func(tries int)
}

// Authority is one principal's view of a remote Group Authority.
type Authority struct {
	cfg     Config
	base    string // https://HOST:PORT/mwp
	http    *http.Client
	epoch   atomic.Uint64
	card    string // the agent's registered card hash, from Dial
	skewLog atomic.Bool
	tails   tails // the newest events given out per Group (diverge.go)
}

// Dial checks cfg and authenticates once (GET /mwp/session), learning an
// agent's session epoch; it returns the authority's refusal when the
// principal or its key is not accepted.
func Dial(ctx context.Context, cfg Config) (*Authority, error) {
	u, err := tlstrust.CheckURL(cfg.URL, cfg.AllowInsecureLoopback)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Actor.Kind != protocol.ActorAgent && cfg.Actor.Kind != protocol.ActorHuman:
		return nil, fmt.Errorf("remote: the actor is an agent or a human, not %q", cfg.Actor.Kind)
	case !protocol.KeyBelongsTo(cfg.Key.KeyID, cfg.Actor.Kind, cfg.Actor.ID):
		return nil, fmt.Errorf("remote: key %s is not a key of %s %s", cfg.Key.KeyID, cfg.Actor.Kind, cfg.Actor.ID)
	}
	tc, err := cfg.Trust.Config()
	if err != nil {
		return nil, err
	}
	if cfg.RateLimitWait == 0 {
		cfg.RateLimitWait = DefaultRateLimitWait
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	scheme := "https"
	if u.Scheme == "ws" {
		scheme = "http"
	}
	a := &Authority{cfg: cfg, base: (&url.URL{Scheme: scheme, Host: u.Host, Path: u.Path}).String(),
		http: &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: false, DisableKeepAlives: true}}}
	if _, err := a.refresh(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// refresh asks who the authority says we are and our session epoch.
func (a *Authority) refresh(ctx context.Context) (protocol.SessionInfo, error) {
	var s protocol.SessionInfo
	if err := a.getJSON(ctx, "/session", &s); err != nil {
		return s, err
	}
	if s.Actor != a.cfg.Actor {
		return s, fmt.Errorf("remote: the authority authenticated %s %s, not %s %s", s.Actor.Kind, s.Actor.ID, a.cfg.Actor.Kind, a.cfg.Actor.ID)
	}
	a.epoch.Store(s.SessionEpoch)
	a.card = s.AgentCardHash
	if d := s.ServerTime.Time.Sub(a.cfg.Clock.Now()); (d > time.Minute || d < -time.Minute) && !a.skewLog.Swap(true) {
		a.cfg.Logger.Warn("remote: the authority's clock differs from ours by more than a minute; signed requests may be refused as stale", "offset", d)
	}
	return s, nil
}

// SessionEpoch is the agent's session epoch as learned at Dial or set by
// OpenSession (0 for a human, or an agent without a session yet). A
// session_open sent through Submit directly is not noticed: use
// OpenSession.
func (a *Authority) SessionEpoch() uint64 { return a.epoch.Load() }

// Actor is the principal this Authority signs for.
func (a *Authority) Actor() protocol.Actor { return a.cfg.Actor }

// OpenSession opens a new session for the agent (session_open at the
// current epoch + 1, spec 15.1) and returns its epoch. It replaces every
// older session of the agent, with its connections.
func (a *Authority) OpenSession(ctx context.Context) (uint64, error) {
	if a.cfg.Actor.Kind != protocol.ActorAgent {
		return 0, errors.New("remote: only an agent opens a session")
	}
	if _, err := a.refresh(ctx); err != nil {
		return 0, err
	}
	next := a.epoch.Load() + 1
	_, raw, err := protocol.BuildCommand(a.cfg.Actor, a.cfg.Key, protocol.CmdSessionOpen, protocol.Envelope{},
		&protocol.OpenSessionPayload{AgentID: a.cfg.Actor.ID, SessionEpoch: next, AgentCardHash: a.card}, a.cfg.Clock.Now())
	if err != nil {
		return 0, err
	}
	if _, err := a.Submit(ctx, raw); err != nil {
		return 0, err
	}
	a.epoch.Store(next)
	return next, nil
}

// Submit sends one signed command (POST /mwp/commands) and returns its
// receipt; a refusal is the authority's *protocol.Error.
func (a *Authority) Submit(ctx context.Context, signed []byte) (*protocol.Receipt, error) {
	var out struct {
		Receipt *protocol.Receipt `json:"receipt"`
	}
	if err := a.do(ctx, http.MethodPost, "/commands", "application/json", signed, false, func(b []byte) error {
		return json.Unmarshal(b, &out)
	}); err != nil {
		return nil, err
	}
	if out.Receipt == nil {
		return nil, errors.New("remote: the answer holds no receipt")
	}
	return out.Receipt, nil
}

// MissionGroup returns the Group of a Mission the principal may know.
func (a *Authority) MissionGroup(ctx context.Context, missionID string) (string, error) {
	var ref protocol.MissionRef
	if err := a.getJSON(ctx, "/missions/"+url.PathEscape(missionID), &ref); err != nil {
		return "", err
	}
	return ref.GroupID, nil
}

// AgentCard returns the registered Agent Card of an agent.
func (a *Authority) AgentCard(ctx context.Context, agentID string) (protocol.AgentCard, error) {
	var c protocol.AgentCard
	err := a.getJSON(ctx, "/agents/"+url.PathEscape(agentID)+"/card", &c)
	return c, err
}

// PutArtifact uploads bytes (PUT /mwp/artifacts/DIGEST) and returns their
// digest and the URI a manifest names.
func (a *Authority) PutArtifact(ctx context.Context, data []byte) (digest, uri string, err error) {
	return a.PutArtifactWith(ctx, data, nil)
}

// PutArtifactWith is PutArtifact authorized by a lease's capability token
// (nil: by the principal's membership).
func (a *Authority) PutArtifactWith(ctx context.Context, data []byte, tok *protocol.CapabilityToken) (digest, uri string, err error) {
	d := protocol.Digest(data)
	var ref protocol.ArtifactRef
	if err := a.doTok(ctx, http.MethodPut, "/artifacts/"+d, "application/octet-stream", data, tok, func(b []byte) error {
		return json.Unmarshal(b, &ref)
	}); err != nil {
		return "", "", err
	}
	if ref.Digest != d {
		return "", "", fmt.Errorf("remote: the authority stored %s, not %s", ref.Digest, d)
	}
	return ref.Digest, ref.URI, nil
}

// Artifact downloads the bytes stored under digest and checks them.
func (a *Authority) Artifact(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	if err := a.do(ctx, http.MethodGet, "/artifacts/"+digest, "", nil, true, func(b []byte) error {
		data = b
		return nil
	}); err != nil {
		return nil, err
	}
	if got := protocol.Digest(data); got != digest {
		return nil, fmt.Errorf("remote: artifact %s: the bytes received hash to %s", digest, got)
	}
	return data, nil
}

func (a *Authority) getJSON(ctx context.Context, path string, v any) error {
	return a.do(ctx, http.MethodGet, path, "", nil, true, func(b []byte) error { return json.Unmarshal(b, v) })
}

func (a *Authority) do(ctx context.Context, method, path, ctype string, body []byte, proof bool, read func([]byte) error) error {
	if !proof {
		return a.send(ctx, method, path, ctype, body, nil, false, read)
	}
	return a.doTok(ctx, method, path, ctype, body, nil, read)
}

func (a *Authority) doTok(ctx context.Context, method, path, ctype string, body []byte, tok *protocol.CapabilityToken, read func([]byte) error) error {
	return a.send(ctx, method, path, ctype, body, tok, true, read)
}

// maxAnswer bounds what one answer may hold: an artifact (64 MiB) or a
// page of events.
const maxAnswer = 80 << 20

// DefaultRateLimitWait bounds how long one request waits out the
// authority's RATE_LIMITED answers (their retryAfterMs) before it returns
// the refusal.
const DefaultRateLimitWait = 30 * time.Second

// send makes a request and hands a 200 answer's body to read; any other
// answer is decoded as the authority's Error. A RATE_LIMITED answer is
// counted before any check (nothing was done), so the request is made
// again, freshly signed, once its retryAfterMs has passed, within
// Config.RateLimitWait: agents sharing an address share its limit, and a
// transient refusal must not read as an answer.
func (a *Authority) send(ctx context.Context, method, path, ctype string, body []byte, tok *protocol.CapabilityToken, proof bool, read func([]byte) error) error {
	if a.cfg.Patience.Grace <= 0 {
		return a.sendLimited(ctx, method, path, ctype, body, tok, proof, read)
	}
	ts, _ := a.cfg.Clock.(clock.Timers) // nil: real time
	waited := 0
	err := Retry(ctx, ts, a.cfg.Patience, mrand.Float64, func(tries int, wait time.Duration, err error) {
		waited = tries
		if a.cfg.Waiting != nil {
			a.cfg.Waiting(tries, wait, err)
		}
	}, func(ctx context.Context) error {
		return a.sendLimited(ctx, method, path, ctype, body, tok, proof, read)
	})
	if a.cfg.Reached != nil && ctx.Err() == nil && (err == nil || !Transient(err)) {
		a.cfg.Reached(waited + 1)
	}
	return err
}

// sendLimited is one request, RATE_LIMITED answers waited out.
func (a *Authority) sendLimited(ctx context.Context, method, path, ctype string, body []byte, tok *protocol.CapabilityToken, proof bool, read func([]byte) error) error {
	var waited time.Duration
	for {
		err := a.sendOnce(ctx, method, path, ctype, body, tok, proof, read)
		wait, ok := rateLimitWait(err)
		if !ok || waited+wait > a.cfg.RateLimitWait {
			return err
		}
		waited += wait
		if a.cfg.RateLimited != nil {
			a.cfg.RateLimited(wait)
		}
		if a.cfg.Logger != nil {
			a.cfg.Logger.Debug("rate limited by the authority; waiting", "method", method, "path", path, "wait", wait)
		}
		if err := a.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// rateLimitWait is how long a RATE_LIMITED refusal asks to wait.
func rateLimitWait(err error) (time.Duration, bool) {
	var e *protocol.Error
	if !errors.As(err, &e) || e.Code != protocol.CodeRateLimited {
		return 0, false
	}
	ms, ok := e.Details["retryAfterMs"].(float64)
	if !ok || ms < 0 {
		return 0, false
	}
	return min(max(time.Duration(ms)*time.Millisecond, time.Millisecond), 5*time.Second), true
}

func (a *Authority) sleep(ctx context.Context, d time.Duration) error {
	ts, ok := a.cfg.Clock.(clock.Timers)
	if !ok {
		ts = clock.Real{} // a Clock that makes no timers: wait in real time
	}
	t := ts.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Authority) sendOnce(ctx context.Context, method, path, ctype string, body []byte, tok *protocol.CapabilityToken, proof bool, read func([]byte) error) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if proof {
		var n [16]byte
		_, _ = rand.Read(n[:])
		h, err := protocol.SignRequest(a.cfg.Actor, a.cfg.Key, method, req.URL.RequestURI(), hex.EncodeToString(n[:]), a.cfg.Clock.Now())
		if err != nil {
			return err
		}
		req.Header.Set(protocol.RequestProofHeader, h)
	}
	if tok != nil {
		h, err := protocol.EncodeDocumentHeader(tok)
		if err != nil {
			return err
		}
		req.Header.Set(protocol.CapabilityHeader, h)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("remote: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("remote: %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	return read(b)
}

// answerError decodes a refusal's Error object; an answer that is not one
// (a proxy's page) becomes an *HTTPError. A Retry-After in whole seconds
// is kept: as the HTTPError's, or as the Error's details.retryAfterMs when
// it names none.
func answerError(status int, retryAfterHeader string, b []byte) error {
	var after time.Duration
	if secs, err := strconv.ParseUint(retryAfterHeader, 10, 32); err == nil {
		after = time.Duration(secs) * time.Second
	}
	var e protocol.Error
	if err := json.Unmarshal(b, &e); err != nil || !e.Code.Known() {
		return &HTTPError{Status: status, RetryAfter: after, Body: string(b[:min(len(b), 200)])}
	}
	if p, ok := e.Details["pointer"].(string); ok {
		e.Pointer = p
	}
	if _, ok := e.Details["retryAfterMs"]; !ok && after > 0 {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		e.Details["retryAfterMs"] = float64(after.Milliseconds())
	}
	return &e
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
