package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/protocol"
)

// fakeServer is a minimal Group Authority speaking the frames over a real
// coder/websocket server on 127.0.0.1 (in the style of tailscale's
// testcontrol). Its knobs inject the faults the tests need.
type fakeServer struct {
	t   testing.TB
	srv *httptest.Server
	url string

	mu       sync.Mutex
	logs     map[string][][]byte // groupId -> signed events, index seq-1
	conns    map[*serverConn]bool
	nonces   map[string]bool
	hellos   []*protocol.Hello
	subs     []protocol.GroupPosition
	served   []protocol.GroupPosition // subs answered with events
	cmds     [][]byte                 // COMMAND bytes (canonical) in arrival order
	cmdConn  []int                    // connection number of each COMMAND
	acks     []protocol.Cursor
	pings    int
	echoes   []string                   // nonces of the client's PING replies
	presence *protocol.PresenceRecord   // of the client's last PING
	sent     map[string]map[uint64]bool // sequences ever sent, per group
	nconn    int
	sigs     []signal

	// Knobs, set before the client starts (or under mu).
	mangle    func(r *rand.Rand, frames [][]byte) [][]byte // replay order and duplicates
	onCommand func(sc *serverConn, frameID string, raw []byte) bool
	echoPings bool
	unknown   map[string]bool
	tooOld    map[string]protocol.SnapshotRef // CURSOR_TOO_OLD when afterSequence < ref.Sequence
	helloErr  *protocol.Error
	dropAfter int // close the first connection after this many EVENT frames (0: never)
	ackCheck  func(c protocol.Cursor)
	// heads: a SUBSCRIBE or ACK past a Group's log gets PROTOCOL_VIOLATION
	// ahead_of_log, as authority-lite answers (diverge_test.go).
	heads  bool
	aheads int // refusals sent
	// tellFirst: CURSOR_TOO_OLD names the first sequence online
	// (details.firstSequence, as authority-lite does).
	tellFirst bool
	seed      uint64
	now       func() time.Time // the authority's clock
}

func newFakeServer(t testing.TB, tlsCert *tls.Certificate) *fakeServer {
	fs := &fakeServer{
		t: t, logs: map[string][][]byte{}, conns: map[*serverConn]bool{}, nonces: map[string]bool{},
		sent: map[string]map[uint64]bool{}, echoPings: true, unknown: map[string]bool{},
		tooOld: map[string]protocol.SnapshotRef{}, seed: 1, now: time.Now,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mwp", fs.handle)
	if tlsCert != nil {
		fs.srv = httptest.NewUnstartedServer(mux)
		fs.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}, MinVersion: tls.VersionTLS12}
		fs.srv.StartTLS()
		fs.url = "wss://" + fs.srv.Listener.Addr().String() + "/mwp"
	} else {
		fs.srv = httptest.NewServer(mux)
		fs.url = "ws://" + fs.srv.Listener.Addr().String() + "/mwp"
	}
	t.Cleanup(func() {
		fs.kill()
		fs.srv.Close()
	})
	return fs
}

// watch makes every server-side event kick sig.
func (fs *fakeServer) watch(sig signal) {
	fs.mu.Lock()
	fs.sigs = append(fs.sigs, sig)
	fs.mu.Unlock()
}

// notifyLocked kicks the watchers; fs.mu must be held.
func (fs *fakeServer) notifyLocked() {
	for _, s := range fs.sigs {
		s.kick()
	}
}

func (fs *fakeServer) setLog(group string, log [][]byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.logs[group] = log
}

// appendLive appends events to a Group's log and pushes them to the
// connections subscribed to it.
func (fs *fakeServer) appendLive(group string, evs ...[]byte) {
	fs.mu.Lock()
	first := len(fs.logs[group]) + 1
	fs.logs[group] = append(fs.logs[group], evs...)
	var cs []*serverConn
	for sc := range fs.conns {
		if sc.isSubscribed(group) {
			cs = append(cs, sc)
		}
	}
	fs.mu.Unlock()
	var frames [][]byte
	for i, ev := range evs {
		frames = append(frames, eventFrame("s-ev-"+group+"-"+strconv.Itoa(first+i), ev))
	}
	for _, sc := range cs {
		sc.enqueue(group, frames)
	}
}

// kill drops every connection abruptly.
func (fs *fakeServer) kill() {
	fs.mu.Lock()
	var cs []*serverConn
	for sc := range fs.conns {
		cs = append(cs, sc)
	}
	fs.mu.Unlock()
	for _, sc := range cs {
		sc.ws.CloseNow()
	}
}

func (fs *fakeServer) snapshot() (hellos int, cmds [][]byte, acks []protocol.Cursor, pings int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.hellos), slices.Clone(fs.cmds), slices.Clone(fs.acks), fs.pings
}

// contiguousSentLocked is the highest sequence n of group such that every
// sequence from the lowest subscribed position to n was sent at some time:
// nothing above it may be ACKed.
func (fs *fakeServer) contiguousSentLocked(group string) uint64 {
	n, first := uint64(0), true
	for _, gp := range fs.served {
		if gp.GroupID == group && (first || gp.AfterSequence < n) {
			n, first = gp.AfterSequence, false
		}
	}
	for fs.sent[group][n+1] {
		n++
	}
	return n
}

// serverConn is one accepted connection; one writer goroutine sends its
// frames: control frames first, then events picked at random among the
// subscribed Groups' queues, so Groups interleave.
type serverConn struct {
	fs     *fakeServer
	ws     *websocket.Conn
	num    int
	rnd    *rand.Rand // writer goroutine: interleaving
	mrnd   *rand.Rand // reader goroutine: mangling
	mu     sync.Mutex
	ctrl   [][]byte
	queues map[string][][]byte
	subbed map[string]bool
	wake   chan struct{}
	// lastSub is the Group of the frame just read when it was a
	// SUBSCRIBE of one Group (reader goroutine only).
	lastSub string
}

func (sc *serverConn) isSubscribed(g string) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.subbed[g]
}

func (sc *serverConn) enqueue(group string, frames [][]byte) {
	sc.mu.Lock()
	sc.queues[group] = append(sc.queues[group], frames...)
	sc.mu.Unlock()
	sc.poke()
}

func (sc *serverConn) control(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	sc.mu.Lock()
	sc.ctrl = append(sc.ctrl, b)
	sc.mu.Unlock()
	sc.poke()
}

func (sc *serverConn) poke() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

func (fs *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(8 << 20)
	fs.mu.Lock()
	fs.nconn++
	sc := &serverConn{fs: fs, ws: ws, num: fs.nconn, rnd: rand.New(rand.NewPCG(fs.seed, uint64(fs.nconn))),
		mrnd:   rand.New(rand.NewPCG(fs.seed+1000, uint64(fs.nconn))),
		queues: map[string][][]byte{}, subbed: map[string]bool{}, wake: make(chan struct{}, 1)}
	fs.conns[sc] = true
	fs.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		ws.CloseNow()
		wg.Wait()
		fs.mu.Lock()
		delete(fs.conns, sc)
		fs.notifyLocked()
		fs.mu.Unlock()
	}()
	if !sc.hello(ctx) {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc.writeLoop(ctx)
	}()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		sc.onFrame(data)
	}
}

// hello reads and checks the client's HELLO as the wss server would.
func (sc *serverConn) hello(ctx context.Context) bool {
	fs := sc.fs
	_, data, err := sc.ws.Read(ctx)
	if err != nil {
		return false
	}
	f, err := protocol.DecodeFrame(data)
	h, ok := f.(*protocol.Hello)
	if err != nil || !ok || h.Proof == nil {
		fs.t.Errorf("first frame is not a client HELLO: %s (%v)", data, err)
		return false
	}
	fail := func(e *protocol.Error) bool {
		b, _ := json.Marshal(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-err", Error: e, InReplyTo: h.FrameID})
		sc.ws.Write(ctx, websocket.MessageText, b)
		sc.ws.Close(websocket.StatusPolicyViolation, string(e.Code))
		return false
	}
	if !slices.Contains(h.ProtocolVersions, protocol.Version) {
		return fail(protocol.Errorf(protocol.CodeUnsupportedVersion, "no common version"))
	}
	proofRaw, _ := json.Marshal(h.Proof)
	doc, _ := protocol.Parse(proofRaw, protocol.DecodeOptions{})
	m, _ := doc.(map[string]any)
	keys := protocol.NewKeySet(agentKey.Public())
	if err := protocol.VerifyFresh(m, keys, fs.now(), protocol.DefaultMaxSkew); err != nil {
		fs.t.Errorf("HELLO proof does not verify: %v", err)
		return fail(protocol.Errorf(protocol.CodeAuthInvalidSignature, "%v", err))
	}
	fs.mu.Lock()
	reused := fs.nonces[h.Proof.Nonce]
	fs.nonces[h.Proof.Nonce] = true
	fs.hellos = append(fs.hellos, h)
	helloErr := fs.helloErr
	fs.notifyLocked()
	fs.mu.Unlock()
	switch {
	case reused:
		fs.t.Errorf("HELLO nonce %s reused", h.Proof.Nonce)
		return fail(protocol.Errorf(protocol.CodeAuthInvalidSignature, "nonce reused"))
	case h.Proof.AgentID != h.AgentID || h.Proof.SessionEpoch != h.SessionEpoch:
		fs.t.Errorf("HELLO proof names %s/%d, frame %s/%d", h.Proof.AgentID, h.Proof.SessionEpoch, h.AgentID, h.SessionEpoch)
		return fail(protocol.Errorf(protocol.CodeAuthInvalidSignature, "proof mismatch"))
	case helloErr != nil:
		return fail(helloErr)
	}
	now := protocol.NewTime(fs.now())
	b, _ := json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: "s-hello", ProtocolVersion: protocol.Version, SessionEpoch: h.SessionEpoch, ServerTime: &now})
	return sc.ws.Write(ctx, websocket.MessageText, b) == nil
}
