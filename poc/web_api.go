package poc

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The terminal fallback's API: `mwp-worker poc approve MISSION` runs in
// another process, reads the page's URL and a bearer token from the run's
// data directory (approval.json, mode 0600: only the local user may
// approve), lists the pending Missions, fetches artifacts, and sends the
// decision it signed itself with the MissionOwner's key. The page relays
// the signed bytes to the authority unchanged.

// APIFile is where a run records how to reach its approval API.
const APIFile = "approval.json"

// APIInfo is the content of APIFile.
type APIInfo struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	Human string `json:"human"`
	// KeyFile is the MissionOwner's private key file of the run.
	KeyFile string `json:"keyFile"`
}

func (s *ApprovalServer) apiRoutes(mux *http.ServeMux) {
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	s.apiToken = base64.RawURLEncoding.EncodeToString(tok[:])
	mux.HandleFunc("GET /api/pending", s.authAPI(s.apiPending))
	mux.HandleFunc("GET /api/artifacts/{digest}", s.authAPI(s.apiArtifact))
	mux.HandleFunc("POST /api/submit", s.authAPI(s.apiSubmit))
	mux.HandleFunc("GET /api/events/{group}", s.authAPI(s.apiEvents))
}

// EventSource is an ApprovalSource that also reads a Group's log, from
// which the terminal shows package review's review.
type EventSource interface {
	GroupEvents(ctx context.Context, groupID string) ([]json.RawMessage, error)
}

// apiEvents is a Group's log as a JSON array of its events.
func (s *ApprovalServer) apiEvents(w http.ResponseWriter, r *http.Request) {
	es, ok := s.src.(EventSource)
	if !ok {
		http.Error(w, "this approval page does not serve events", http.StatusNotFound)
		return
	}
	evs, err := es.GroupEvents(r.Context(), r.PathValue("group"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// Each event as the authority signed it: the default escaping of
	// "<", ">" and "&" would change the bytes its signature covers.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(evs)
}

// APIToken is the bearer token the API requires.
func (s *ApprovalServer) APIToken() string { return s.apiToken }

func (s *ApprovalServer) authAPI(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, []byte("Bearer "+s.apiToken)) != 1 {
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (s *ApprovalServer) apiPending(w http.ResponseWriter, r *http.Request) {
	list, err := s.src.Pending(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func (s *ApprovalServer) apiArtifact(w http.ResponseWriter, r *http.Request) {
	data, err := s.src.ArtifactBytes(r.Context(), r.PathValue("digest"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

// apiSubmit relays a signed decision. Only mission.approve and
// mission.request_changes are relayed; the authority checks the signature.
func (s *ApprovalServer) apiSubmit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var cmd protocol.Command
	if err := json.Unmarshal(body, &cmd); err != nil || (cmd.Type != protocol.CmdMissionApprove && cmd.Type != protocol.CmdMissionRequestChanges) {
		writeAPIError(w, protocol.Errorf(protocol.CodeInvalidCommand, "only a signed mission.approve or mission.request_changes is relayed"))
		return
	}
	rec, err := s.approver.Submit(r.Context(), body)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rec)
}

func writeAPIError(w http.ResponseWriter, err error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		pe = protocol.Errorf(protocol.CodeInternalError, "%v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	_ = json.NewEncoder(w).Encode(pe)
}

// WriteAPIInfo records the API's address and token in dir (0600).
func WriteAPIInfo(dir string, info APIInfo) error {
	raw, err := json.Marshal(info)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, APIFile), raw, 0o600)
}

// APIClient is the terminal fallback's view of a running PoC: an
// ApprovalSource and a SubmitFunc over the page's API.
type APIClient struct {
	Info APIInfo
	HTTP *http.Client
}

// ReadAPIClient reads dir/approval.json.
func ReadAPIClient(dir string) (*APIClient, error) {
	raw, err := os.ReadFile(filepath.Join(dir, APIFile))
	if err != nil {
		return nil, fmt.Errorf("no running proof of concept with --data %s: %w", dir, err)
	}
	var info APIInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, err
	}
	return &APIClient{Info: info, HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

func (c *APIClient) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Info.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Info.Token)
	return c.HTTP.Do(req)
}

// Pending lists the Missions awaiting approval in the running PoC.
func (c *APIClient) Pending(ctx context.Context) ([]PendingMission, error) {
	resp, err := c.do(ctx, http.MethodGet, "api/pending", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("approval API: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var out []PendingMission
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// ArtifactBytes fetches stored bytes (callers verify the hash).
func (c *APIClient) ArtifactBytes(ctx context.Context, digest string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "api/artifacts/"+digest, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("approval API: %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// GroupEvents reads a Group's log through the page.
func (c *APIClient) GroupEvents(ctx context.Context, groupID string) ([]json.RawMessage, error) {
	resp, err := c.do(ctx, http.MethodGet, "api/events/"+url.PathEscape(groupID), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("approval API: %s", resp.Status)
	}
	var out []json.RawMessage
	return out, json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&out)
}

// Submit sends a signed decision through the page to the authority.
func (c *APIClient) Submit(ctx context.Context, signed []byte) (protocol.Receipt, error) {
	resp, err := c.do(ctx, http.MethodPost, "api/submit", signed)
	if err != nil {
		return protocol.Receipt{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		var r protocol.Receipt
		return r, json.NewDecoder(resp.Body).Decode(&r)
	}
	var pe protocol.Error
	if err := json.NewDecoder(resp.Body).Decode(&pe); err != nil || pe.Code == "" {
		return protocol.Receipt{}, fmt.Errorf("approval API: %s", resp.Status)
	}
	return protocol.Receipt{}, &pe
}
