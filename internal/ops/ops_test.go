package ops

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pprof  bool
		ready  error
		paths  map[string]int
		bodies map[string]string
	}{
		{"ready, no pprof", false, nil,
			map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/debug/pprof/": 404},
			map[string]string{"/readyz": "ok\n"}},
		{"not ready, pprof", true, errors.New("not connected (connecting)"),
			map[string]int{"/healthz": 200, "/readyz": 503, "/debug/pprof/": 200},
			map[string]string{"/readyz": "not connected (connecting)\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry()
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "mwp_test_things_total", Help: "things"})
			reg.MustRegister(c)
			c.Add(3)
			ln, err := Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				Serve(ctx, ln, Handler(Config{Gatherer: reg, Pprof: tc.pprof, Checks: Checks{Ready: func() error { return tc.ready }}}), slog.New(slog.DiscardHandler))
			}()
			defer func() { cancel(); <-done }()
			base := "http://" + ln.Addr().String()
			for path, want := range tc.paths {
				code, body := get(t, base+path)
				if code != want {
					t.Errorf("%s: %d, want %d", path, code, want)
				}
				if b, ok := tc.bodies[path]; ok && body != b {
					t.Errorf("%s: body %q, want %q", path, body, b)
				}
			}
			_, body := get(t, base+"/metrics")
			p := expfmt.NewTextParser(model.LegacyValidation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(body))
			if err != nil {
				t.Fatalf("metrics do not parse: %v", err)
			}
			if f := fams["mwp_test_things_total"]; f == nil || f.Metric[0].Counter.GetValue() != 3 {
				t.Fatalf("counter: %v", f)
			}
			if fams["go_goroutines"] == nil || fams["process_start_time_seconds"] == nil {
				t.Fatal("no Go runtime or process metrics")
			}
		})
	}
}
