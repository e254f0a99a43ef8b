package poc

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"wiretime": func(t time.Time) string { return protocol.NewTime(t).String() },
	"short":    shortDigest,
}).ParseFS(templateFS, "templates/*.tmpl"))

// maxFormBytes bounds a decision POST: a comment plus a few short fields.
const maxFormBytes = 64 << 10

// ApprovalServer is the human approval page (spec 22): it lists Missions
// awaiting approval with their evidence and artifacts and turns a click on
// Approve or Request changes into a Command signed by the human
// MissionOwner. Everything it renders from a Mission is untrusted text and
// goes through html/template; the page runs no script at all.
type ApprovalServer struct {
	src      ApprovalSource
	approver Approver
	clock    clock.Clock
	log      *slog.Logger
	csrf     string
	apiToken string // bearer token of the terminal fallback's API (web_api.go)
	handler  http.Handler
	wg       sync.WaitGroup
}

// NewApprovalServer returns the approval page as an http.Handler. Decisions
// are signed by approver at the time clk tells.
func NewApprovalServer(src ApprovalSource, approver Approver, clk clock.Clock, logger *slog.Logger) *ApprovalServer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	s := &ApprovalServer{src: src, approver: approver, clock: clk, log: logger, csrf: base64.RawURLEncoding.EncodeToString(tok[:])}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("POST /decide", s.decide)
	mux.HandleFunc("GET /artifacts/{digest}", s.artifact)
	s.apiRoutes(mux)
	// The CSRF token is the check the brief names; Go's Fetch-metadata check
	// is a second, independent one.
	s.handler = http.NewCrossOriginProtection().Handler(mux)
	return s
}

// ServeHTTP serves the page to loopback Host names only, so a DNS-rebinding
// site cannot read the page (and its CSRF token) through a name it controls.
func (s *ApprovalServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		http.Error(w, "this page answers only on 127.0.0.1 or localhost", http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.handler.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ListenLocal serves the page on 127.0.0.1 (addr is ":PORT", ":0" for any
// free port, or with host 127.0.0.1 or localhost) until ctx ends, and
// returns the URL to print. Wait blocks until every listener has stopped.
func (s *ApprovalServer) ListenLocal(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("poc: approval page address %q: %w", addr, err)
	}
	if host != "" && host != "127.0.0.1" && host != "localhost" {
		return "", fmt.Errorf("poc: approval page address %q: the page binds 127.0.0.1 only", addr)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return "", fmt.Errorf("poc: approval page: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("approval page stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	url := "http://" + ln.Addr().String() + "/"
	s.log.Info("approval page listening", "url", url)
	return url, nil
}

// Wait blocks until every ListenLocal server has shut down.
func (s *ApprovalServer) Wait() { s.wg.Wait() }

type indexPage struct {
	CSRF     string
	Missions []missionReview
	Human    protocol.Actor
	Error    string
}

func (s *ApprovalServer) index(w http.ResponseWriter, r *http.Request) {
	list, err := s.src.Pending(r.Context())
	page := indexPage{CSRF: s.csrf, Human: s.approver.Human}
	status := http.StatusOK
	if err != nil {
		s.log.Warn("approval page: list pending missions", "err", err)
		page.Error, status = err.Error(), http.StatusBadGateway
	}
	for _, p := range list {
		page.Missions = append(page.Missions, reviewOf(r.Context(), s.src, p))
	}
	s.render(w, status, "index.html.tmpl", page)
}

type resultPage struct {
	MissionID string
	Type      protocol.CommandType
	ActionID  string
	Events    []protocol.EventRef
	Code      protocol.Code
	Message   string
	// Waiting are the Missions still awaiting approval after this one.
	Waiting []PendingMission
}

// waiting lists the pending Missions other than decided, for the result
// page; a failure to list leaves it empty (the index will say why).
func (s *ApprovalServer) waiting(ctx context.Context, decided string) []PendingMission {
	list, err := s.src.Pending(ctx)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(list, func(p PendingMission) bool { return p.MissionID == decided })
}

func (s *ApprovalServer) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	form, err := parseDecisionForm(r, s.csrf)
	if err != nil {
		s.fail(r.Context(), w, "", "", err)
		return
	}
	p, err := FindPending(r.Context(), s.src, form.MissionID)
	if err != nil {
		s.fail(r.Context(), w, form.MissionID, "", err)
		return
	}
	cmd, rec, err := s.approver.Decide(r.Context(), form, p, s.clock.Now())
	if err != nil {
		var typ protocol.CommandType
		if cmd != nil {
			typ = cmd.Type
		}
		s.fail(r.Context(), w, form.MissionID, typ, err)
		return
	}
	s.log.Info("mission decision accepted", "mission", p.MissionID, "type", cmd.Type, "actionId", cmd.ActionID, "events", len(rec.Events))
	s.render(w, http.StatusOK, "result.html.tmpl", resultPage{MissionID: p.MissionID, Type: cmd.Type, ActionID: cmd.ActionID, Events: rec.Events,
		Waiting: s.waiting(r.Context(), p.MissionID)})
}

// parseDecisionForm reads and checks one decision POST: CSRF token first,
// then the mission id, the decision, the revision the page showed and the
// comment (required to request changes).
func parseDecisionForm(r *http.Request, csrf string) (Decision, error) {
	if err := r.ParseForm(); err != nil {
		return Decision{}, protocol.Errorf(protocol.CodeInvalidCommand, "unreadable form: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(csrf)) != 1 {
		return Decision{}, protocol.Errorf(protocol.CodeAuthForbidden, "missing or wrong form token; reload the page")
	}
	d := Decision{MissionID: r.PostForm.Get("mission"), Comment: r.PostForm.Get("comment")}
	if !validID(d.MissionID) {
		return Decision{}, protocol.Errorf(protocol.CodeInvalidCommand, "mission %q is not a valid id", d.MissionID)
	}
	switch r.PostForm.Get("decision") {
	case "approve":
		d.Approve = true
	case "request_changes":
		if len(ChangeLines(d.Comment)) == 0 {
			return Decision{}, protocol.Errorf(protocol.CodeInvalidCommand, "requesting changes needs a comment saying what to change")
		}
	default:
		return Decision{}, protocol.Errorf(protocol.CodeInvalidCommand, "decision must be approve or request_changes")
	}
	rev, err := strconv.ParseUint(r.PostForm.Get("revision"), 10, 53)
	if err != nil {
		return Decision{}, protocol.Errorf(protocol.CodeInvalidCommand, "revision %q is not a revision number", r.PostForm.Get("revision"))
	}
	d.ExpectedRevision = rev
	return d, nil
}

func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// fail shows a refused decision: the protocol code and message, with an
// HTTP status that tells scripts the same thing.
func (s *ApprovalServer) fail(ctx context.Context, w http.ResponseWriter, mission string, typ protocol.CommandType, err error) {
	code := protocol.CodeOf(err)
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	s.log.Warn("mission decision refused", "mission", mission, "type", typ, "code", code, "err", err)
	s.render(w, statusFor(code), "result.html.tmpl", resultPage{MissionID: mission, Type: typ, Code: code, Message: msg, Waiting: s.waiting(ctx, "")})
}

func statusFor(c protocol.Code) int {
	switch c {
	case protocol.CodeRevisionConflict, protocol.CodeInvalidStateTransition, protocol.CodeActionIDCollision:
		return http.StatusConflict
	case protocol.CodeAuthForbidden, protocol.CodeAuthInvalidSignature, protocol.CodeMembershipRequired, protocol.CodeMembershipStale:
		return http.StatusForbidden
	case protocol.CodeInvalidCommand, protocol.CodeSchemaValidationFailed:
		return http.StatusBadRequest
	case protocol.CodeRateLimited, protocol.CodeBackpressure:
		return http.StatusTooManyRequests
	}
	return http.StatusBadGateway
}

func (s *ApprovalServer) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("approval page: render", "template", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
