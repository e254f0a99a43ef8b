package workercmd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
	"github.com/missionweave/mwp-worker/runtime"
	"github.com/missionweave/mwp-worker/slots"
)

// fakeAuthority answers the artifact routes as authority-lite does, after
// failing the first fail requests to path prefix failOn the way failWith
// says: "reset" closes the connection unanswered, "503" answers a page
// with Retry-After, "422" refuses with SCHEMA_VALIDATION_FAILED.
type fakeAuthority struct {
	srv      *httptest.Server
	failOn   string
	fail     int
	failWith string

	mu    sync.Mutex
	tries map[string]int // by method and route
	blobs map[string][]byte
}

func newFakeAuthority(t *testing.T, failOn string, fail int, failWith string) *fakeAuthority {
	f := &fakeAuthority{failOn: failOn, fail: fail, failWith: failWith, tries: map[string]int{}, blobs: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAuthority) serve(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.tries[route]++
	n := f.tries[route]
	f.mu.Unlock()
	if strings.HasPrefix(route, f.failOn) && n <= f.fail {
		switch f.failWith {
		case "reset":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		case "503":
			w.Header().Set("Retry-After", "0")
			http.Error(w, "<html>upstream restarting</html>", http.StatusServiceUnavailable)
		case "422":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(protocol.Errorf(protocol.CodeSchemaValidationFailed, "not an artifact"))
		}
		return
	}
	switch {
	case route == "GET /mwp/session":
		_ = json.NewEncoder(w).Encode(protocol.SessionInfo{Actor: protocol.Actor{Kind: protocol.ActorAgent, ID: "w1"}, SessionEpoch: 1, ServerTime: protocol.NewTime(time.Now())})
	case r.Method == http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		d := strings.TrimPrefix(r.URL.Path, "/mwp/artifacts/")
		f.mu.Lock()
		f.blobs[d] = b
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(protocol.ArtifactRef{Digest: d, Size: uint64(len(b)), URI: "mwp-artifact:" + d})
	case r.Method == http.MethodGet:
		f.mu.Lock()
		data, ok := f.blobs[strings.TrimPrefix(r.URL.Path, "/mwp/artifacts/")]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(protocol.Errorf(protocol.CodeInvalidCommand, "no such artifact"))
			return
		}
		_, _ = w.Write(data)
	}
}

func (f *fakeAuthority) count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[route]
}

// link is run's artifact link to url, with the offline grace given and
// the first wait 1ms (the waits' law is remote.Patience's, tested there).
func link(t *testing.T, url string, grace time.Duration) *artifactLink {
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorAgent, "w1", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &runtime.WorkerConfig{URL: url, AllowInsecureLoopback: true, AgentID: "w1", Key: k, OfflineGrace: grace, Logger: slog.New(slog.DiscardHandler)}
	return &artifactLink{ctx: context.Background(), cfg: cfg, rnd: func() float64 { return 0.5 }, first: time.Millisecond, waits: newWaits()}
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") + "/mwp" }

// An upload, and a download, that meet an authority failing its first
// tries wait it out and succeed: the handler sees no failure. A
// refusal that is an answer comes back after one try, not retryable.
func TestArtifactTransferWaitsOutAnOutage(t *testing.T) {
	data := []byte("the handler's output")
	digest := protocol.Digest(data)
	put, get := "PUT /mwp/artifacts/"+digest, "GET /mwp/artifacts/"+digest
	for _, c := range []struct {
		name     string
		failOn   string
		fail     int
		failWith string
		tries    int           // of the failing route
		code     protocol.Code // "" for success
	}{
		{"upload: connection closed three times", put, 3, "reset", 4, ""},
		{"upload: 503 page twice", put, 2, "503", 3, ""},
		{"upload: session check cut short first", "GET /mwp/session", 2, "reset", 3, ""},
		{"upload: a validation refusal is definitive", put, 100, "422", 1, protocol.CodeSchemaValidationFailed},
		{"download: connection closed twice", get, 2, "reset", 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAuthority(t, c.failOn, c.fail, c.failWith)
			l := link(t, wsURL(f.srv), time.Minute)
			uri, publish, err := l.put(context.Background(), data)
			var got []byte
			if err == nil && strings.HasPrefix(c.failOn, "GET /mwp/artifacts") {
				got, err = l.get(context.Background(), digest)
			}
			if n := f.count(c.failOn); n != c.tries {
				t.Errorf("%d tries of %s, want %d", n, c.failOn, c.tries)
			}
			// Every try but the last was waited after, and counted.
			transfer := "upload"
			if strings.HasPrefix(c.failOn, "GET /mwp/artifacts") {
				transfer = "download"
			}
			if n := counterValue(t, l.waits.WithLabelValues(transfer)); n != float64(c.tries-1) {
				t.Errorf("mwp_worker_upload_waits_total{transfer=%q} = %v, want %d", transfer, n, c.tries-1)
			}
			if c.code != "" {
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != c.code || pe.Retryable {
					t.Fatalf("put = %v, want a definitive %s", err, c.code)
				}
				if _, again := slots.Transient(err); again {
					t.Fatal("a handler would be told to ask again")
				}
				return
			}
			if err != nil || uri != "mwp-artifact:"+digest || !publish {
				t.Fatalf("put = %q %v %v", uri, publish, err)
			}
			if strings.HasPrefix(c.failOn, "GET /mwp/artifacts") && string(got) != string(data) {
				t.Fatalf("get = %q", got)
			}
		})
	}
}

// An authority that stays unreachable past the offline grace: the upload
// tries until the grace's end (on the clock of the synctest bubble),
// then gives the handler a retryable answer, which an external handler
// reads as retryable (slots.Transient).
func TestArtifactUploadPastTheGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String() + "/mwp"
	ln.Close() // nothing listens: connection refused
	synctest.Test(t, func(t *testing.T) {
		l := link(t, url, 2*time.Minute)
		start := time.Now()
		_, _, err := l.put(context.Background(), []byte("x"))
		if took := time.Since(start); took != 2*time.Minute {
			t.Errorf("gave up after %v, want the offline grace", took)
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInternalError || !pe.Retryable || pe.Details["reason"] != remote.ReasonUnreachable {
			t.Fatalf("put = %#v, want a retryable INTERNAL_ERROR", err)
		}
		if wait, again := slots.Transient(err); !again || wait <= 0 {
			t.Fatalf("slots.Transient = %v %v, want a wait and true", wait, again)
		}
	})
}

// A negative offline grace (none): the first failure is the answer,
// retryable all the same.
func TestArtifactUploadWithoutGrace(t *testing.T) {
	f := newFakeAuthority(t, "PUT", 100, "503")
	l := link(t, wsURL(f.srv), -1)
	_, _, err := l.put(context.Background(), []byte("x"))
	if _, again := slots.Transient(err); !again {
		t.Fatalf("put = %v, want a retryable answer", err)
	}
	if n := f.count("PUT /mwp/artifacts/" + protocol.Digest([]byte("x"))); n != 1 {
		t.Fatalf("%d tries, want 1", n)
	}
}

// counterValue reads a counter's value.
func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
