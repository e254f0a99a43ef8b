package runtime

import (
	"strings"
	"testing"
	"time"
)

func TestRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 2 * time.Second}, {1, 4 * time.Second}, {2, 8 * time.Second}, {4, 32 * time.Second}, {5, time.Minute}, {50, time.Minute}} {
		if got := retryBackoff(time.Second, tc.n); got != tc.want {
			t.Errorf("after %d refusals: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// A Group the worker follows before it is a member is refused at every
// SUBSCRIBE: the worker subscribes again with a growing back-off and says
// so once at WARN, not every two seconds forever; once it is a member the
// subscription goes through and the log says that too.
func TestWorkerRejectedGroupBacksOff(t *testing.T) {
	k := newWKit(t)
	h := newStepHandler(1)
	tw := k.start(k.workerConfig("w1", t.TempDir(), h, 1))
	tw.w.AddGroup("grp-a") // not a member yet
	refusals := func() int {
		return strings.Count(k.logs.String(), "group rejected") + strings.Count(k.logs.String(), "group still rejected")
	}
	k.until("four refusals", func() bool {
		if refusals() >= 4 {
			return true
		}
		k.fc.Advance(time.Second)
		return false
	}, tw)
	logs := k.logs.String()
	if n := strings.Count(logs, "level=WARN msg=\"group rejected"); n != 1 {
		t.Fatalf("%d WARN lines about the refused Group, want 1:\n%s", n, logs)
	}
	if elapsed := k.fc.Now().Sub(t0); elapsed < 2*time.Second+4*time.Second+8*time.Second {
		t.Fatalf("four refusals within %v: no back-off", elapsed)
	}
	k.member("w1")
	k.until("subscribed", func() bool {
		if strings.Contains(k.logs.String(), "group subscribed") {
			return true
		}
		k.fc.Advance(time.Second)
		return false
	}, tw)
}
