package slots

import (
	"context"
	"fmt"

	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/toolkeys"
)

// ToolCall runs one external operation through fn, which receives the
// idempotency key to hand to the tool (spec 16). In order it checks: the
// run is live and its credentials valid (WORK_LEASE_EXPIRED); op names a
// tool and operation the contract allows (AUTH_FORBIDDEN); the host's
// policy allows op.Risk now (offline: refused unless AllowedOffline). Then
// the key is derived from (mission, item, ownership epoch, op.ID) — this
// slot's own key space — and the call goes through the Ledger, which
// returns the first result for a repeated key. Each time fn actually runs,
// op.Cost plus one toolCall (and one sideEffect) is charged first; if that
// would exceed the contract's budgets or the host's remaining budget, fn
// does not run and the error is BUDGET_EXCEEDED.
func (w *Work) ToolCall(ctx context.Context, op Op, fn func(ctx context.Context, key string) ([]byte, error)) ([]byte, error) {
	r := w.r
	if !op.Risk.Class.Known() {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "slots: operation %q has unknown risk class %q", op.ID, op.Risk.Class)
	}
	if !finite(op.Cost) {
		return nil, protocol.Errorf(protocol.CodeInvalidCommand, "slots: operation %q has a negative or non-finite cost", op.ID)
	}
	r.mu.Lock()
	err := w.activeLocked(r.pool.cfg.Clock.Now())
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if op.Tool == "" || !r.allowedTools[op.Tool] {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "slots: tool %q is not in the contract's allowedTools", op.Tool)
	}
	if op.Operation == "" || !r.allowedOps[op.Operation] {
		return nil, protocol.Errorf(protocol.CodeAuthForbidden, "slots: operation %q is not in the contract's allowedOperations", op.Operation)
	}
	if err := r.pool.cfg.Host.Allow(ctx, r.slot, op.Risk); err != nil {
		return nil, fmt.Errorf("slots: %s %s refused by policy: %w", op.Tool, op.Operation, err)
	}
	if b, err := r.pool.cfg.Host.Remaining(ctx, r.slot); err == nil {
		r.mu.Lock()
		r.remaining = b
		r.mu.Unlock()
	} else {
		return nil, fmt.Errorf("slots: remaining budget: %w", err)
	}
	tk := toolkeys.Op{MissionID: r.slot.MissionID, WorkItemID: r.slot.WorkItemID, OwnershipEpoch: r.slot.OwnershipEpoch, OperationID: op.ID}
	key, err := toolkeys.Key(tk)
	if err != nil {
		return nil, err
	}
	delta := op.Cost
	delta.ToolCalls++
	if op.SideEffect || op.Risk.Irreversible || op.Risk.ExternallyVisible {
		delta.SideEffects++
	}
	call := func(ctx context.Context, key string, _ uint64) ([]byte, error) {
		if err := w.charge(delta, true); err != nil {
			return nil, err
		}
		return fn(ctx, key)
	}
	if r.pool.cfg.Ledger == nil {
		return call(ctx, key, 1)
	}
	return r.pool.cfg.Ledger.Do(ctx, tk, call)
}

// Charge records usage the handler incurred outside ToolCall (model
// tokens, money, compute seconds). It is always recorded — it was spent —
// and the result is BUDGET_EXCEEDED when the run is now over a budget;
// the handler should then stop.
func (w *Work) Charge(u protocol.Usage) error {
	if !finite(u) {
		return protocol.Errorf(protocol.CodeInvalidCommand, "slots: a charge must be finite and non-negative")
	}
	return w.charge(u, false)
}

// charge adds delta to the run's usage. With reserve, an over-budget delta
// is refused and not recorded.
func (w *Work) charge(delta protocol.Usage, reserve bool) error {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.pool.cfg.Clock.Now()
	if reserve {
		if err := w.activeLocked(now); err != nil {
			return err
		}
	}
	used := r.usage.Add(delta)
	used.WallClockSeconds = now.Sub(r.startedAt).Seconds()
	dim := r.budgets.Exceeded(used)
	if dim == "" {
		dim = r.remaining.Exceeded(used)
	}
	if dim != "" && reserve {
		return protocol.Errorf(protocol.CodeBudgetExceeded, "slots: the %s budget does not cover this call", dim)
	}
	used.WallClockSeconds = 0
	r.usage = used
	if dim != "" {
		return protocol.Errorf(protocol.CodeBudgetExceeded, "slots: the %s budget is exhausted", dim)
	}
	return nil
}
