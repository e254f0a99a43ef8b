package slots

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// Every figure is a ratio to a baseline measured in the same run
// (docs/performance.md). ToolCall is compared with deriving its idempotency key alone
// (JCS + SHA-256, the part no implementation can skip); a whole run, Start
// to Finish, with the floor of what any run does here: create and remove
// its private directory and look up its latest checkpoint.
func BenchmarkToolCall(b *testing.B) {
	e := newEnv(b, 1)
	fn := func(context.Context, string) ([]byte, error) { return nil, nil }
	a := assignment("g", "wi", "l", "h")
	a.Contract.Budgets = protocol.Budgets{}
	var toolDur, keyDur time.Duration
	e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := w.ToolCall(ctx, readGit, fn); err != nil {
				return Result{}, err
			}
		}
		toolDur = time.Since(start)
		start = time.Now()
		for i := 0; i < b.N; i++ {
			toolkeys.Key(toolkeys.Op{MissionID: "mis-g", WorkItemID: "wi", OwnershipEpoch: 1, OperationID: readGit.ID})
		}
		keyDur = time.Since(start)
		return Result{}, nil
	})}
	a.Contract.RequiredCapabilities = caps("h")
	b.ResetTimer()
	if _, err := e.pool.Start(a); err != nil {
		b.Fatal(err)
	}
	if o := <-e.host.outcomes; o.Kind != Completed {
		b.Fatalf("%v %v", o.Kind, o.Err)
	}
	b.ReportMetric(toolDur.Seconds()/keyDur.Seconds(), "toolcall/key")
}

func BenchmarkRun(b *testing.B) {
	e := newEnv(b, 1)
	e.pool.cfg.Handlers = []Handler{handler("h", func(context.Context, *Work) (Result, error) { return Result{}, nil })}
	a := assignment("g", "wi", "l", "h")
	root := b.TempDir()
	var runDur, floorDur time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := e.pool.Start(a); err != nil {
			b.Fatal(err)
		}
		<-e.host.outcomes
		runDur += time.Since(start)

		start = time.Now()
		dir, err := os.MkdirTemp(root, "slot0-")
		if err != nil {
			b.Fatal(err)
		}
		e.store.Latest("g", "wi")
		os.RemoveAll(dir)
		floorDur += time.Since(start)
	}
	b.ReportMetric(runDur.Seconds()/floorDur.Seconds(), "run/floor")
}
