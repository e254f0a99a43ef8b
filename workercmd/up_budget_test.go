package workercmd

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `up --cost/--limit` (MWP_COSTS, MWP_LIMITS) give up's worker the same
// admission budgets as run's: an expected cost the stage's budget does not
// cover has the offer refused on the budget rule, naming the dimension;
// costs and limits that fit let the Mission through; a malformed value is
// refused on one line before anything starts.
func TestUpAdmissionBudgets(t *testing.T) {
	defer slog.SetDefault(slog.Default()) // Main makes its logger the default
	planFile := filepath.Join(t.TempDir(), "flaky.yaml")
	if err := os.WriteFile(planFile, []byte(flakyPlan), 0o600); err != nil {
		t.Fatal(err)
	}
	up := func(ctx context.Context, args ...string) (int, *lockedBuffer, *lockedBuffer) {
		var out, errb lockedBuffer
		code := Run(ctx, append([]string{"prog", "up", planFile, "--auto-approve", "--data", t.TempDir()}, args...), &out, &errb, &flaky{})
		return code, &out, &errb
	}

	t.Run("fits", func(t *testing.T) {
		code, out, errb := up(context.Background(), "--cost", "text.flaky:toolCalls=5", "--limit", "toolCalls=10", "--log-level", "error")
		if code != 0 || !strings.Contains(out.String(), "mission mis-flaky approved\n") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		}
	})
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"cost past the stage's budget", nil, []string{"--cost", "text.flaky:toolCalls=20"}, "toolCalls budget 10 is below the expected cost 20"},
		{"limit below the cost", nil, []string{"--cost", "text.flaky:toolCalls=5", "--limit", "toolCalls=4"}, "exceeds the worker's limit 4"},
		{"from the environment", map[string]string{"MWP_COSTS": "text.flaky:toolCalls=20"}, nil, "toolCalls budget 10 is below the expected cost 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			started := make(chan *lockedBuffer, 1)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			go func() {
				var out, e lockedBuffer
				started <- &e
				done <- Run(ctx, append([]string{"prog", "up", planFile, "--auto-approve", "--data", t.TempDir()}, tc.args...), &out, &e, &flaky{})
			}()
			errb := <-started
			deadline := time.After(time.Minute)
			for !strings.Contains(errb.String(), "offer refused") {
				select {
				case code := <-done:
					t.Fatalf("up ended (exit %d) without refusing the offer:\n%s", code, errb)
				case <-deadline:
					t.Fatalf("no offer refused:\n%s", errb)
				case <-time.After(10 * time.Millisecond):
				}
			}
			cancel()
			<-done
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("the refusal does not say %q:\n%s", tc.want, errb)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		code, _, errb := up(context.Background(), "--limit", "bogus=1")
		if code != 1 || !strings.HasPrefix(errb.String(), "up: --limit") || strings.Count(errb.String(), "\n") != 1 {
			t.Fatalf("exit %d, stderr %q: want exit 1 and one line on --limit", code, errb)
		}
	})
}
