package poc

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/handlers/python"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// The PoC's stage handlers are written in Python (poc/python/), as spec 22
// asks of the reference PoC: requirements analysis, implementation,
// testing, code review, integration and the load and soak stages run as
// external handlers over mwp-slot/1 through the shipped helper module
// (handlers/python/mwpslot.py). They read their inputs with the protocol's
// fetch request (the worker checks that each is an input of the item's
// contract), run go test and apply the patch as tool calls under the
// worker's idempotency keys, and reach the two things of the driver that
// are not the protocol's, the integration repository (the PoC's external
// service) and the driver's hold points, over a local HTTP service
// (stageService). The Go handlers (handlers_stages.go, handlers_load.go)
// are their twins: a test keeps the outputs the same, and they run when
// python3 is missing or when asked for (Options.GoHandlers).
//
//go:embed python/*.py
var pythonStages embed.FS

// PythonStages is an installed copy of the Python stages and the local
// service they reach the driver through; Close stops the service.
type PythonStages struct {
	Exe   string // the python3 executable
	Dir   string // mwpslot.py and the stage scripts
	Gofmt string // gofmt: the implementation formats its code, the reviewer checks new files; "" runs the Go implementation
	Go    string // the go command the testing stage runs
	// GoCache is the build cache the testing stage's go test uses: the
	// handler's environment is scrubbed, and a cold cache per run would
	// rebuild the standard library's test dependencies every time.
	GoCache string

	svc *stageService // nil: no integration repository, no holds
}

// InstallPythonStages writes the helper module and the stage scripts into
// dir, finds python3 (an error when there is none), gofmt and go, and
// starts the local service the stages reach the driver through.
func InstallPythonStages(dir string) (*PythonStages, error) {
	exe, err := python.Find()
	if err != nil {
		return nil, err
	}
	// The stages run in their slot's directory: a relative --data path
	// would name the scripts from there.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := python.Install(dir); err != nil {
		return nil, err
	}
	files, err := pythonStages.ReadDir("python")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := pythonStages.ReadFile("python/" + f.Name())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644); err != nil {
			return nil, err
		}
	}
	p := &PythonStages{Exe: exe, Dir: dir}
	if goBin, err := FindGo(); err == nil {
		p.Go = goBin
		if g := filepath.Join(filepath.Dir(goBin), "gofmt"); fileExists(g) {
			p.Gofmt = g
		}
	}
	p.GoCache = goCache()
	if p.svc, err = startStageService(); err != nil {
		return nil, err
	}
	return p, nil
}

// goCache is the go build cache this process's go commands use.
func goCache() string {
	if c := os.Getenv("GOCACHE"); c != "" {
		return c
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "go-build")
	}
	return ""
}

// Close stops the stages' local service; runs waiting at a hold end.
func (p *PythonStages) Close() error {
	if p == nil || p.svc == nil {
		return nil
	}
	return p.svc.srv.Close()
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// Kinds are the stage kinds whose handlers are Python; the others run
// their Go twins. Implementation needs gofmt to write gofmt'd code.
func (p *PythonStages) Kinds() map[StageKind]bool {
	k := map[StageKind]bool{StageRequirements: true, StageTesting: true, StageReview: true, StageIntegration: true,
		StageLoad: true, StageSoak: true}
	if p.Gofmt != "" {
		k[StageImplementation] = true
	}
	return k
}

// KindList is Kinds as a sorted comma list, for the operator.
func (p *PythonStages) KindList() string {
	var ks []string
	for k := range p.Kinds() {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// HandlerLanguage is the language of the handler that runs a stage of
// kind k: "python" or "go" (every stage is Go when p is nil).
func HandlerLanguage(k StageKind, p *PythonStages) string {
	if p != nil && p.Kinds()[k] {
		return "python"
	}
	return "go"
}

// handlers are the Python stages of cfg's agent (the producer their
// Evidence names). The Go constants a stage needs are passed as
// arguments, so each has one description; the baseline project is
// written beside the scripts.
func (p *PythonStages) handlers(cfg *HandlerConfig) []slots.Handler {
	// A project not written fails the stages that read it, naming the file.
	project, _ := p.writeProject(cfg.Project)
	var svc []string
	host := &stageHost{cfg: cfg, runs: map[string]stageRun{}}
	if p.svc != nil {
		svc = []string{"--svc", p.svc.add(host)}
	}
	env := map[string]string{}
	if p.GoCache != "" {
		env["GOCACHE"] = p.GoCache
	}
	run := func(capID, script string, args ...string) slots.Handler {
		// -S -E: no site module (a site's .pth imports cost more than the
		// stage itself) and no PYTHON* variables; the stages need neither.
		return pyHandler{host: host, Exec: slots.Exec{Path: p.Exe, Cap: capability(capID), Env: env,
			Args: append([]string{"-S", "-E", filepath.Join(p.Dir, script), "--agent", cfg.AgentID}, args...)}}
	}
	var gofmt, goCmd []string
	if p.Gofmt != "" {
		gofmt = []string{"--gofmt", p.Gofmt}
	}
	if p.Go != "" {
		goCmd = []string{"--go", p.Go}
	}
	kinds := p.Kinds()
	hs := []slots.Handler{
		run(CapRequirements, "requirements.py"),
		run(CapTest, "testing.py", append(append([]string{"--project", project}, goCmd...), svc...)...),
		run(CapReview, "review.py", gofmt...),
		run(CapIntegrate, "integration.py", svc...),
		run(CapLoad, "load.py", "--steps", strconv.Itoa(LoadSteps), "--rounds", strconv.Itoa(LoadRounds),
			"--step-ms", strconv.Itoa(int(LoadStepTime.Milliseconds()))),
		run(CapSoak, "load.py", "--steps", strconv.Itoa(SoakSteps), "--rounds", strconv.Itoa(LoadRounds),
			"--step-ms", strconv.Itoa(int(SoakStepTime.Milliseconds()))),
	}
	if kinds[StageImplementation] {
		hs = append(hs, run(CapImplement, "implementation.py", append(append([]string{"--project", project}, gofmt...), svc...)...))
	}
	return hs
}

// writeProject writes the baseline project (nil: TinyProject) as JSON
// beside the scripts, named by its digest, and returns the file's path.
func (p *PythonStages) writeProject(t Tree) (string, error) {
	if t == nil {
		t = TinyProject()
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.Dir, "project-"+protocol.Digest(raw)[len("sha256:"):][:16]+".json")
	return path, os.WriteFile(path, raw, 0o644)
}

// pyHandler is a Python stage: it waits at the driver's start hold
// before the program starts, and keeps its run known to the local
// service while the program runs, so a hold request names it by lease.
type pyHandler struct {
	slots.Exec
	host *stageHost
}

// Run implements slots.Handler.
func (h pyHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	h.host.cfg.Holds.wait(ctx, h.host.cfg.AgentID, w, HoldAtStart)
	defer h.host.register(ctx, w)()
	return h.Exec.Run(ctx, w)
}

// stageService is the local HTTP service (127.0.0.1) of the Python
// stages: POST /<host>/integration applies a patch to the integration
// repository under the caller's idempotency key, POST /<host>/hold waits
// at a hold point of the driver. <host> is a random name per handler set,
// so each worker's stages reach their own configuration.
type stageService struct {
	srv *http.Server
	url string

	mu    sync.Mutex
	hosts map[string]*stageHost
}

// stageHost is one handler set's side of the service.
type stageHost struct {
	cfg *HandlerConfig

	mu   sync.Mutex
	runs map[string]stageRun // by lease id
}

type stageRun struct {
	ctx context.Context
	w   *slots.Work
}

func startStageService() (*stageService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("poc: the Python stages' service: %w", err)
	}
	s := &stageService{url: "http://" + ln.Addr().String(), hosts: map[string]*stageHost{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{host}/integration", s.integration)
	mux.HandleFunc("POST /{host}/hold", s.hold)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// add names h on the service and returns its base URL.
func (s *stageService) add(h *stageHost) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.hosts[name] = h
	s.mu.Unlock()
	return s.url + "/" + name
}

func (s *stageService) host(r *http.Request) *stageHost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts[r.PathValue("host")]
}

func (h *stageHost) register(ctx context.Context, w *slots.Work) func() {
	lease := w.Slot().LeaseID
	h.mu.Lock()
	h.runs[lease] = stageRun{ctx, w}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.runs, lease)
		h.mu.Unlock()
	}
}

func answer(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

func refuse(rw http.ResponseWriter, status int, err error) {
	answer(rw, status, map[string]string{"error": err.Error()})
}

// integration applies a patch as EffectLog.Apply does and answers with
// the receipt; 409 is a patch that does not apply.
func (s *stageService) integration(rw http.ResponseWriter, r *http.Request) {
	h := s.host(r)
	if h == nil || h.cfg.Integration == nil {
		refuse(rw, http.StatusNotFound, errors.New("poc: no integration repository configured"))
		return
	}
	var req struct {
		Key         string `json:"key"`
		PatchDigest string `json:"patchDigest"`
		Patch       string `json:"patch"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 4<<20)).Decode(&req); err != nil {
		refuse(rw, http.StatusBadRequest, err)
		return
	}
	eff, repeat, err := h.cfg.Integration.Apply(req.Key, req.PatchDigest, req.Patch)
	switch {
	case errors.Is(err, ErrConflict):
		refuse(rw, http.StatusConflict, err)
	case err != nil:
		refuse(rw, http.StatusInternalServerError, err)
	default:
		answer(rw, http.StatusOK, Receipt{Key: eff.Key, EffectSeq: eff.Seq, PatchDigest: req.PatchDigest, Commit: eff.Commit, Files: eff.Files, Repeat: repeat})
	}
}

// hold waits at the named hold point for the run holding the lease, as
// a Go stage waits there (Holds.wait): until the hold is released, the
// worker asks the run to yield, the run ends or the program goes away.
// The answer says whether the worker asked the run to yield.
func (s *stageService) hold(rw http.ResponseWriter, r *http.Request) {
	h := s.host(r)
	var req struct {
		Lease string    `json:"lease"`
		At    HoldPoint `json:"at"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 1<<10)).Decode(&req); err != nil || h == nil {
		refuse(rw, http.StatusBadRequest, fmt.Errorf("poc: a hold request names a lease and a point: %v", err))
		return
	}
	h.mu.Lock()
	run, ok := h.runs[req.Lease]
	h.mu.Unlock()
	if !ok {
		refuse(rw, http.StatusNotFound, fmt.Errorf("poc: no run holds lease %q", req.Lease))
		return
	}
	ctx, cancel := context.WithCancel(run.ctx)
	defer cancel()
	defer context.AfterFunc(r.Context(), cancel)()
	h.cfg.Holds.wait(ctx, h.cfg.AgentID, run.w, req.At)
	// yield: the worker asked the run to yield while it waited. The
	// program is told here, as its preempt message may still be on its
	// way.
	answer(rw, http.StatusOK, map[string]bool{"yield": preempted(run.w)})
}
