package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// readBody reads at most limit bytes of the body; a longer one is
// PROTOCOL_VIOLATION with details.limit (answered 413).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, name string) ([]byte, bool) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(BodyTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeErrorStatus(w, http.StatusRequestEntityTooLarge, protocol.WithDetails(
			protocol.Errorf(protocol.CodeProtocolViolation, "the body is larger than %d bytes", limit), "limit", name, "maxBytes", limit))
		return nil, false
	case err != nil:
		writeError(w, protocol.Errorf(protocol.CodeProtocolViolation, "reading the body: %v", err))
		return nil, false
	}
	return data, true
}

// command takes one signed command as the body and answers its receipt.
// The command authenticates itself; peer is empty, so an agent's command
// is held to its current session epoch rather than a connection's.
func (h *Handler) command(w http.ResponseWriter, r *http.Request) {
	raw, ok := readBody(w, r, protocol.DefaultMaxBytes, "maxCommandBytes")
	if !ok {
		return
	}
	canon, err := protocol.CanonicalBytes(raw, protocol.DecodeOptions{})
	if err != nil {
		writeError(w, err)
		return
	}
	rec, err := h.b.Submit(r.Context(), "", canon)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"receipt": rec})
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	s := protocol.SessionInfo{Actor: a, ServerTime: protocol.NewTime(h.b.Now())}
	if a.Kind == protocol.ActorAgent {
		s.SessionEpoch, s.AgentCardHash = h.b.SessionEpoch(a.ID), h.b.AgentCardHash(a.ID)
	}
	writeJSON(w, http.StatusOK, s)
}

// query reads an optional unsigned integer parameter.
func query(r *http.Request, name string, def, limit uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 53)
	if err != nil || n > limit {
		return 0, protocol.Errorf(protocol.CodeProtocolViolation, "query parameter %s=%q is not an integer 0…%d", name, v, limit).At("/" + name)
	}
	return n, nil
}

// events answers {"events": [...]}: up to max events after after, each the
// signed envelope's stored bytes. With waitMs and nothing to return yet, it
// waits that long for the next append.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	g := r.PathValue("group")
	after, err := query(r, "after", 0, protocol.MaxSafeInteger)
	if err != nil {
		writeError(w, err)
		return
	}
	max, err := query(r, "max", MaxEvents, MaxEvents)
	if err == nil && max == 0 {
		max = MaxEvents
	}
	if err != nil {
		writeError(w, err)
		return
	}
	wait, err := query(r, "waitMs", 0, uint64(MaxWait/time.Millisecond))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := h.b.AuthorizeActor(a, g); err != nil {
		writeError(w, err)
		return
	}
	// A position past the log is held only by a reader that followed a
	// history this authority lost (restored from an older copy): refused
	// as on the binding, not waited on.
	if heads, ok := h.b.(wss.Heads); ok {
		if last, ok := heads.Head(g); ok && after > last {
			writeError(w, wss.AheadOfLog(g, after, last))
			return
		}
	}
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Millisecond)
		select {
		case <-h.b.Changed(g, after):
		case <-ctx.Done():
		}
		cancel()
	}
	evs, err := h.b.Events(g, after, int(max))
	if err != nil {
		writeError(w, err)
		return
	}
	// The stored bytes go out unchanged: they are what was signed.
	out := []byte(`{"events":[`)
	for i, e := range evs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e.Raw...)
	}
	out = append(out, "]}"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (h *Handler) mission(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	id := r.PathValue("mission")
	g, err := h.b.MissionGroup(a, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.MissionRef{MissionID: id, GroupID: g})
}

// capability reads the optional MWP-Capability header.
func capability(r *http.Request) (*protocol.CapabilityToken, error) {
	v := r.Header.Values(protocol.CapabilityHeader)
	switch len(v) {
	case 0:
		return nil, nil
	case 1:
		return protocol.DecodeCapabilityHeader(v[0])
	}
	return nil, protocol.Errorf(protocol.CodeProtocolViolation, "send at most one %s header", protocol.CapabilityHeader)
}

func (h *Handler) putArtifact(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	want := r.PathValue("digest")
	if err := checkDigest(want); err != nil {
		writeError(w, err)
		return
	}
	tok, err := capability(r)
	if err == nil {
		err = h.b.MayPutArtifact(a, tok)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	data, ok := readBody(w, r, h.MaxArtifactBytes, "maxArtifactBytes")
	if !ok {
		return
	}
	if got := protocol.Digest(data); got != want {
		writeError(w, protocol.WithDetails(protocol.Errorf(protocol.CodeInvalidCommand, "the body hashes to %s, not %s", got, want), "expected", want, "computed", got))
		return
	}
	d, err := h.b.PutArtifact(data)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.ArtifactRef{Digest: d, Size: uint64(len(data)), URI: protocol.ArtifactURI(d)})
}

func (h *Handler) getArtifact(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	d := r.PathValue("digest")
	if err := checkDigest(d); err != nil {
		writeError(w, err)
		return
	}
	tok, err := capability(r)
	if err != nil {
		writeError(w, err)
		return
	}
	data, err := h.b.ReadArtifact(a, tok, d)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeInvalidCommand {
		writeErrorStatus(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// checkDigest holds a path digest to sha256:<64 lowercase hex>.
func checkDigest(d string) error {
	bad := protocol.Errorf(protocol.CodeProtocolViolation, "artifact digest %q is not sha256:<64 lowercase hex>", d).At("/digest")
	if len(d) != 71 || d[:7] != "sha256:" {
		return bad
	}
	for _, c := range d[7:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return bad
		}
	}
	return nil
}

func (h *Handler) card(w http.ResponseWriter, r *http.Request, _ protocol.Actor) {
	id := r.PathValue("agent")
	c, ok := h.b.AgentCard(id)
	if !ok {
		writeErrorStatus(w, http.StatusNotFound, protocol.Errorf(protocol.CodeInvalidCommand, "agent %s has no registered Agent Card", id).At("/agentId"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}
