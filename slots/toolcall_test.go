package slots

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

var readGit = Op{ID: "op", Tool: "git", Operation: "read", Risk: Risk{Class: protocol.RiskLow}}

// runWith runs body as the handler of one assignment and returns the
// outcome.
func runWith(t *testing.T, e *env, a Assignment, body func(ctx context.Context, w *Work) (Result, error)) Outcome {
	t.Helper()
	e.pool.cfg.Handlers = []Handler{handler("h", body)}
	a.Contract.RequiredCapabilities = caps("h")
	e.start(t, a)
	return e.host.wait(t)
}

func TestToolCallRefusals(t *testing.T) {
	ran := func(t *testing.T) func(context.Context, string) ([]byte, error) {
		return func(context.Context, string) ([]byte, error) {
			t.Error("fn ran")
			return nil, nil
		}
	}
	for _, tc := range []struct {
		name  string
		op    Op
		allow func(Risk) error
		code  protocol.Code
	}{
		{"tool not allowed", Op{ID: "o", Tool: "curl", Operation: "read", Risk: Risk{Class: protocol.RiskLow}}, nil, protocol.CodeAuthForbidden},
		{"no tool", Op{ID: "o", Operation: "read", Risk: Risk{Class: protocol.RiskLow}}, nil, protocol.CodeAuthForbidden},
		{"operation not allowed", Op{ID: "o", Tool: "git", Operation: "delete", Risk: Risk{Class: protocol.RiskLow}}, nil, protocol.CodeAuthForbidden},
		{"unknown risk", Op{ID: "o", Tool: "git", Operation: "read"}, nil, protocol.CodeInvalidCommand},
		{"negative cost", Op{ID: "o", Tool: "git", Operation: "read", Risk: Risk{Class: protocol.RiskLow}, Cost: protocol.Usage{Money: -1}}, nil, protocol.CodeInvalidCommand},
		{"no operation id", Op{Tool: "git", Operation: "read", Risk: Risk{Class: protocol.RiskLow}}, nil, protocol.CodeInvalidCommand},
		{"offline policy refuses irreversible", Op{ID: "o", Tool: "git", Operation: "write", Risk: Risk{Class: protocol.RiskLow, Irreversible: true}},
			func(r Risk) error {
				if !r.AllowedOffline() {
					return protocol.Errorf(protocol.CodeApprovalRequired, "offline")
				}
				return nil
			}, protocol.CodeApprovalRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.host.allow = tc.allow
			var err error
			runWith(t, e, assignment("g", "wi", "l", "h"), func(ctx context.Context, w *Work) (Result, error) {
				_, err = w.ToolCall(ctx, tc.op, ran(t))
				return Result{}, nil
			})
			if protocol.CodeOf(err) != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
		})
	}
}

func TestAllowedOffline(t *testing.T) {
	for _, tc := range []struct {
		r    Risk
		want bool
	}{
		{Risk{Class: protocol.RiskLow}, true},
		{Risk{Class: protocol.RiskMedium}, true},
		{Risk{Class: protocol.RiskHigh}, false},
		{Risk{Class: protocol.RiskCritical}, false},
		{Risk{Class: protocol.RiskLow, Irreversible: true}, false},
		{Risk{Class: protocol.RiskLow, ExternallyVisible: true}, false},
		{Risk{}, false},
	} {
		if got := tc.r.AllowedOffline(); got != tc.want {
			t.Errorf("%+v: %v", tc.r, got)
		}
	}
}

// Budgets: the contract's caps and the host's remaining budget both bound
// what a slot may spend; a refused call never runs.
func TestBudgetExhaustion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		budgets   protocol.Budgets
		remaining protocol.Budgets
		op        Op
		okCalls   int
		dim       protocol.Code
	}{
		{"toolCalls", protocol.Budgets{ToolCalls: u64(2)}, protocol.Budgets{}, readGit, 2, protocol.CodeBudgetExceeded},
		{"money", protocol.Budgets{Money: f64(5)}, protocol.Budgets{}, Op{ID: "o", Tool: "http", Operation: "read", Risk: Risk{Class: protocol.RiskLow}, Cost: protocol.Usage{Money: 2}}, 2, protocol.CodeBudgetExceeded},
		{"sideEffects", protocol.Budgets{SideEffects: u64(1)}, protocol.Budgets{}, Op{ID: "o", Tool: "git", Operation: "write", Risk: Risk{Class: protocol.RiskLow}, SideEffect: true}, 1, protocol.CodeBudgetExceeded},
		{"host remaining", protocol.Budgets{ToolCalls: u64(100)}, protocol.Budgets{ToolCalls: u64(3)}, readGit, 3, protocol.CodeBudgetExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.host.remaining = tc.remaining
			a := assignment("g", "wi", "l", "h")
			a.Contract.Budgets = tc.budgets
			runs, oks := 0, 0
			var last error
			o := runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
				for i := range 10 {
					op := tc.op
					op.ID = "op-" + string(rune('a'+i))
					_, err := w.ToolCall(ctx, op, func(context.Context, string) ([]byte, error) { runs++; return nil, nil })
					if err != nil {
						last = err
						return Result{}, err
					}
					oks++
				}
				return Result{}, nil
			})
			if oks != tc.okCalls || runs != tc.okCalls || protocol.CodeOf(last) != tc.dim {
				t.Fatalf("%d ok, %d ran, last %v", oks, runs, last)
			}
			// A budget refusal is permanent: no retry.
			if o.Kind != Failed || o.Attempts != 1 || o.Usage.ToolCalls != uint64(tc.okCalls) {
				t.Fatalf("outcome %v attempts %d usage %+v", o.Kind, o.Attempts, o.Usage)
			}
		})
	}
}

// Charge records what was spent even past the budget, and says so.
func TestCharge(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.Contract.Budgets = protocol.Budgets{Tokens: u64(1000)}
	var errs []error
	o := runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
		errs = append(errs, w.Charge(protocol.Usage{Tokens: 600}), w.Charge(protocol.Usage{Tokens: 600}),
			w.Charge(protocol.Usage{ComputeSeconds: -1}))
		return Result{}, nil
	})
	if errs[0] != nil || protocol.CodeOf(errs[1]) != protocol.CodeBudgetExceeded || protocol.CodeOf(errs[2]) != protocol.CodeInvalidCommand {
		t.Fatalf("errors %v", errs)
	}
	if o.Usage.Tokens != 1200 {
		t.Fatalf("usage %+v", o.Usage)
	}
}

// The wall-clock budget ends a run that outlives it.
func TestWallClockBudget(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.Contract.Budgets = protocol.Budgets{WallClockSeconds: f64(60)}
	started := make(chan struct{})
	e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, nil
	})}
	a.Contract.RequiredCapabilities = caps("h")
	e.start(t, a)
	<-started
	e.advance(time.Minute)
	if o := e.host.wait(t); o.Kind != Failed || o.Reason != "wallClockSeconds budget exhausted" || o.Usage.WallClockSeconds != 60 {
		t.Fatalf("outcome %v %q %+v", o.Kind, o.Reason, o.Usage)
	}
}

// Credentials expire at their own time or the lease's, whichever is
// first; then tool calls fail.
func TestCredentialsExpire(t *testing.T) {
	e := newEnv(t, 1)
	a := assignment("g", "wi", "l", "h")
	a.Credentials.ExpiresAt = t0.Add(2 * time.Hour) // beyond the lease: capped
	step := make(chan struct{})
	results := make(chan error, 4)
	e.pool.cfg.Handlers = []Handler{handler("h", func(ctx context.Context, w *Work) (Result, error) {
		c, err := w.Credentials()
		if err != nil || !c.ExpiresAt.Equal(t0.Add(time.Hour)) || c.Token != "tok-l" {
			t.Errorf("credentials %+v %v", c, err)
		}
		step <- struct{}{}
		<-step
		_, err = w.Credentials()
		results <- err
		_, err = w.ToolCall(ctx, readGit, func(context.Context, string) ([]byte, error) { return nil, nil })
		results <- err
		return Result{}, nil
	})}
	a.Contract.RequiredCapabilities = caps("h")
	slot := e.start(t, a)
	<-step
	// Rotated credentials that expire sooner.
	e.pool.SetCredentials(slot, "l", Credentials{Token: "tok-2", ExpiresAt: t0.Add(time.Minute)})
	e.clock.Advance(time.Minute) // no Tick: the lease is still valid
	step <- struct{}{}
	for range 2 {
		if err := <-results; protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
			t.Fatalf("after expiry: %v", err)
		}
	}
	e.host.wait(t)
}

// The key handed to fn is the docs/wire.md toolkey of this slot's execution;
// through the Ledger a repeated operation returns its first result
// without running or charging again.
func TestToolCallKeysAndLedger(t *testing.T) {
	e := newEnv(t, 1)
	l := &memLedger{done: map[toolkeys.Op][]byte{}}
	e.pool.cfg.Ledger = l
	a := assignment("g", "wi", "l", "h")
	a.OwnershipEpoch = 4
	var keys []string
	var outs []string
	o := runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
		for i := range 3 {
			out, err := w.ToolCall(ctx, readGit, func(_ context.Context, key string) ([]byte, error) {
				keys = append(keys, key)
				return []byte{byte('0' + i)}, nil
			})
			if err != nil {
				return Result{}, err
			}
			outs = append(outs, string(out))
		}
		return Result{}, nil
	})
	want, _ := toolkeys.Key(toolkeys.Op{MissionID: "mis-g", WorkItemID: "wi", OwnershipEpoch: 4, OperationID: "op"})
	if len(keys) != 1 || keys[0] != want {
		t.Fatalf("keys %v, want once %s", keys, want)
	}
	if outs[0] != "0" || outs[1] != "0" || outs[2] != "0" {
		t.Fatalf("outputs %v: a repeat must return the first result", outs)
	}
	if o.Kind != Completed || o.Usage.ToolCalls != 1 {
		t.Fatalf("outcome %v usage %+v", o.Kind, o.Usage)
	}
}

// A Work kept past its attempt refuses everything.
func TestWorkAfterReturn(t *testing.T) {
	e := newEnv(t, 1)
	var kept *Work
	runWith(t, e, assignment("g", "wi", "l", "h"), func(ctx context.Context, w *Work) (Result, error) {
		kept = w
		return Result{}, nil
	})
	ctx := context.Background()
	if _, err := kept.ToolCall(ctx, readGit, nil); !errors.Is(err, ErrEnded) {
		t.Fatalf("tool call: %v", err)
	}
	if _, err := kept.Checkpoint(ctx, nil, checkpointMeta("x")); !errors.Is(err, ErrEnded) {
		t.Fatalf("checkpoint: %v", err)
	}
	if _, err := kept.PublishArtifact(ctx, "text/plain", nil); !errors.Is(err, ErrEnded) {
		t.Fatalf("publish: %v", err)
	}
}
