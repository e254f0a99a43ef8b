package authoritylite

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestScaleAuthority prints what one more connected agent costs the
// authority (heap, RSS, goroutines; CPU a second while it is idle) and
// what one more subscriber costs it per event streamed. The agents run in
// a child process (TestScaleClients), so every figure is the authority's
// own: each is the difference between the process's readings with and
// without them, divided by their number (a baseline of the same run).
//
// It runs only with MWP_SCALE=N set (N agents; docs/scale.sh uses 200)
// and asserts nothing about time or memory.
func TestScaleAuthority(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MWP_SCALE"))
	if n == 0 {
		t.Skip("set MWP_SCALE=N to measure (docs/scale.sh)")
	}
	const events, idle = 200, 5 * time.Second
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Clock: clock.Real{}, Key: mustKey(t, protocol.ActorService, "authority-1"), RateBurst: 1 << 30, RateEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hk := mustKey(t, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := s.Principal(owner, hk)
	if _, err := alice.Do(ctx, protocol.CmdMissionCreate, "grp-a", &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
		t.Fatal(err)
	}
	plan := scalePlan{}
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		a := s.Principal(agent(id), scaleKey(t, id))
		card := protocol.AgentCard{AgentVersion: "1.0.0", OrganizationID: "org-1", DisplayName: id, Capabilities: protocol.List[protocol.Capability]{{ID: "chat", Version: "1.0.0"}}, Roles: protocol.List[protocol.Role]{protocol.RoleWorker}, MaxConcurrency: 1}
		if err := a.Join(ctx, card); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Do(ctx, protocol.CmdMembershipChange, "grp-a", &protocol.ChangeMembershipPayload{Principal: agent(id), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}}); err != nil {
			t.Fatal(err)
		}
		plan.Agents = append(plan.Agents, scaleAgent{ID: id, Session: s.SessionEpoch(id)})
	}
	cert, fp, err := wss.LoadOrCreateCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ln, err := wss.Listen(sctx, "127.0.0.1:0", wss.ListenOptions{Certificate: &cert})
	if err != nil {
		t.Fatal(err)
	}
	go wss.NewServer(s, wss.Options{MaxConns: 4 * n}).Serve(sctx, ln)
	plan.URL, plan.Fingerprint = "wss://"+ln.Addr().String()+wss.Path, fp

	post := func(from int) time.Duration {
		cpu := processCPU()
		for i := range events {
			if _, err := alice.Do(ctx, protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: fmt.Sprintf("m-%d", from+i), ConversationID: "c", Text: "progress note"}); err != nil {
				t.Fatal(err)
			}
		}
		return processCPU() - cpu
	}
	// Before any agent: the process at rest, idle CPU, and posting alone.
	before := readHeld()
	idle0 := idleCPU(idle)
	post0 := post(0)

	planFile := filepath.Join(dir, "plan.json")
	data, _ := json.Marshal(plan)
	if err := os.WriteFile(planFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestScaleClients$", "-test.timeout", "10m")
	child.Env = append(os.Environ(), "MWP_SCALE_PLAN="+planFile)
	child.Stderr = os.Stderr
	in, _ := child.StdinPipe()
	outPipe, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = child.Wait() }()
	out := bufio.NewScanner(outPipe)
	expect := func(word string) string {
		for out.Scan() {
			if line := out.Text(); strings.HasPrefix(line, word) {
				return strings.TrimSpace(strings.TrimPrefix(line, word))
			}
		}
		t.Fatalf("the clients ended before %q: %v", word, out.Err())
		return ""
	}
	expect("connected")
	connected := readHeld()
	idleN := idleCPU(idle)

	fmt.Fprintf(in, "subscribe %d\n", s.LastSequence("grp-a"))
	expect("subscribed")
	// Each subscriber receives every event posted: wait until all have.
	want := int64(n) * events
	postN := func() time.Duration {
		cpu := processCPU()
		post(events)
		for {
			fmt.Fprintln(in, "count")
			if got, _ := strconv.ParseInt(expect("count"), 10, 64); got >= want {
				break
			}
		}
		return processCPU() - cpu
	}()

	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	t.Logf("scale: %d agents connected over wss, %d events posted, idle window %v", n, events, idle)
	fmt.Printf("| per connected agent at the authority | heap %.1f KB, RSS %.1f KB, %.2f goroutines | %d agents (HELLO done, idle), against the same process before they connected |\n",
		per(before.heap, connected.heap)/1024, per(before.rss, connected.rss)/1024, per(uint64(before.goroutines), uint64(connected.goroutines)), n)
	fmt.Printf("| authority CPU per idle connection | %.1f µs a second | %d idle connections for %v, against %v with none |\n",
		float64((idleN-idle0).Microseconds())/float64(n)/idle.Seconds(), n, idle, idle)
	fmt.Printf("| authority CPU per event per subscriber | %.1f µs (posting alone: %.1f µs an event) | %d events to %d subscribers, against the same events with none |\n",
		float64((postN-post0).Microseconds())/float64(want), float64(post0.Microseconds())/events, events, n)
}

// scalePlan is what the child process is told: where to connect, as whom.
type scalePlan struct {
	URL, Fingerprint string
	Agents           []scaleAgent
}

type scaleAgent struct {
	ID      string
	Session uint64
}

// scaleKey is agent id's key, the same in both processes.
func scaleKey(t testing.TB, id string) protocol.PrivateKey {
	seed := sha256.Sum256([]byte("scale " + id))
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, id, "k1"), bytes.NewReader(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestScaleClients is TestScaleAuthority's child: it connects every agent
// of the plan, then answers lines on its standard input ("subscribe SEQ":
// every connection subscribes to grp-a after SEQ; "count": the events
// received so far) on its standard output.
func TestScaleClients(t *testing.T) {
	file := os.Getenv("MWP_SCALE_PLAN")
	if file == "" {
		t.Skip("the child of TestScaleAuthority")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var plan scalePlan
	if err := json.Unmarshal(data, &plan); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{TLSClientConfig: wss.ClientTLSConfig(plan.Fingerprint)}
	var conns []*websocket.Conn
	var got atomic.Int64
	var wg sync.WaitGroup
	for _, a := range plan.Agents {
		ws, err := scaleHello(ctx, plan.URL, tr, scaleKey(t, a.ID), a)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, ws)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, msg, err := ws.Read(ctx)
				if err != nil {
					return
				}
				if bytes.HasPrefix(msg, []byte(`{"event":`)) {
					got.Add(1)
				}
			}
		}()
	}
	fmt.Println("connected")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch cmd, arg, _ := strings.Cut(in.Text(), " "); cmd {
		case "subscribe":
			for i, ws := range conns {
				f := fmt.Sprintf(`{"type":"SUBSCRIBE","frameId":"s%d","groups":[{"groupId":"grp-a","afterSequence":%s}]}`, i, arg)
				if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Println("subscribed")
		case "count":
			fmt.Println("count", got.Load())
		}
	}
	cancel()
	for _, ws := range conns {
		ws.CloseNow()
	}
	wg.Wait()
}

// scaleHello dials and says HELLO as a.
func scaleHello(ctx context.Context, url string, tr *http.Transport, k protocol.PrivateKey, a scaleAgent) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, Subprotocols: []string{wss.Subprotocol}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(1 << 20)
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	proof := protocol.HelloProof{AgentID: a.ID, SessionEpoch: a.Session, Nonce: hex.EncodeToString(nonce[:]), IssuedAt: protocol.NewTime(time.Now())}
	proof.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: proof.IssuedAt}
	signed, err := protocol.SignedValue(proof, k)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(signed, &proof); err != nil {
		return nil, err
	}
	hello, _ := json.Marshal(protocol.Hello{Type: protocol.FrameHello, FrameID: "h1", ProtocolVersions: []string{protocol.Version}, AgentID: a.ID, SessionEpoch: a.Session, Proof: &proof})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		return nil, err
	}
	_, msg, err := ws.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if typ, _ := frameType(msg); typ != protocol.FrameHello {
		return nil, fmt.Errorf("hello answered with %s", msg)
	}
	return ws, nil
}

// held is what the process holds after a collection.
type held struct {
	heap, rss  uint64
	goroutines int
}

func readHeld() held {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return held{heap: ms.HeapAlloc, rss: rssBytes(), goroutines: goruntime.NumGoroutine()}
}

// rssBytes is VmRSS from /proc/self/status (0 where there is none).
func rssBytes() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// idleCPU is the process's CPU time over a window of d: a measurement
// window, not a wait for something to happen.
func idleCPU(d time.Duration) time.Duration {
	cpu := processCPU()
	time.Sleep(d)
	return processCPU() - cpu
}
