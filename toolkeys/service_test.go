package toolkeys

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// service is a fake external service that honours idempotency keys like a
// payment API: the first request under a key performs the effect, every
// repeat gets the first response. It also counts what the ledger must
// keep small: effects per operation (the request body names the logical
// operation, so an effect under a second key for the same operation shows
// up) and requests per key.
type service struct {
	mu       sync.Mutex
	seq      int
	byKey    map[string][]byte // key -> first response
	effects  map[string]int    // operation (body) -> effects performed
	requests map[string]int    // key -> requests received
}

func newService() *service {
	return &service{byKey: map[string][]byte{}, effects: map[string]int{}, requests: map[string]int{}}
}

// apply handles one request; replayed reports a deduplicated repeat.
func (s *service) apply(key string, body []byte) (resp []byte, replayed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[key]++
	if r, ok := s.byKey[key]; ok {
		return r, true
	}
	s.seq++
	r := fmt.Appendf(nil, "effect %d for %s", s.seq, body)
	s.byKey[key] = r
	s.effects[string(body)]++
	return r, false
}

func (s *service) effectsOf(body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[body]
}

func (s *service) requestsOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

func (s *service) firstResponse(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// opBody is the request body naming op, the unit "one external effect"
// is counted in.
func opBody(op Op) string {
	return fmt.Sprintf("%s/%s/%d/%s", op.MissionID, op.WorkItemID, op.OwnershipEpoch, op.OperationID)
}

// callService is the Call a well-behaved handler makes: the ledger's key
// goes to the service as its idempotency key.
func callService(s *service, op Op) Call {
	return func(_ context.Context, key string, _ uint64) ([]byte, error) {
		r, _ := s.apply(key, []byte(opBody(op)))
		return r, nil
	}
}

// serveHTTP exposes s on 127.0.0.1: POST /effect with an Idempotency-Key
// header; the response body is the service's response.
func serveHTTP(t testing.TB, s *service) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if r.Method != http.MethodPost || key == "" || err != nil {
			http.Error(w, "POST with an Idempotency-Key", http.StatusBadRequest)
			return
		}
		resp, _ := s.apply(key, body)
		w.Write(resp)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/effect"
}

// postEffect is the Call of a handler talking to the HTTP service.
func postEffect(ctx context.Context, url, key string, op Op) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(opBody(op))))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("service: %s: %s", resp.Status, b)
	}
	return b, err
}

// openDB opens a bbolt file the way the worker's store does (fsync on) and
// checks its consistency when the test ends.
func openDB(t testing.TB, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if db.Path() == "" { // closed by the test
			return
		}
		db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("bbolt check: %v", err)
			}
			return nil
		})
		db.Close()
	})
	return db
}

func tempDBPath(t testing.TB) string { return filepath.Join(t.TempDir(), "worker.db") }

func openLedger(t testing.TB, db *bolt.DB, opts Options) *Ledger {
	t.Helper()
	if opts.Now == nil {
		start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		n := 0
		opts.Now = func() time.Time { // a fake clock stepping 1s per reading
			mu.Lock()
			defer mu.Unlock()
			n++
			return start.Add(time.Duration(n) * time.Second)
		}
	}
	l, err := OpenLedgerWith(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustNotCall fails the test if the ledger calls it.
func mustNotCall(t testing.TB) Call {
	return func(context.Context, string, uint64) ([]byte, error) {
		t.Error("the ledger called an operation it must not call")
		return nil, fmt.Errorf("must not be called")
	}
}
