package workercmd

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// What an operator tells admission control (spec 10.3) about the worker:
// the expected cost of one run per capability (--cost) and the most the
// accepted, unfinished items may hold at once (--limit), in the six budget
// dimensions. runtime.WorkerConfig's Costs and Limits.

// budgetDims are the six dimensions by their wire names; integer ones
// take whole numbers.
var budgetDims = map[string]struct {
	integer bool
	set     func(b *protocol.Budgets, v float64)
}{
	"money":            {false, func(b *protocol.Budgets, v float64) { b.Money = &v }},
	"tokens":           {true, func(b *protocol.Budgets, v float64) { u := uint64(v); b.Tokens = &u }},
	"toolCalls":        {true, func(b *protocol.Budgets, v float64) { u := uint64(v); b.ToolCalls = &u }},
	"computeSeconds":   {false, func(b *protocol.Budgets, v float64) { b.ComputeSeconds = &v }},
	"wallClockSeconds": {false, func(b *protocol.Budgets, v float64) { b.WallClockSeconds = &v }},
	"sideEffects":      {true, func(b *protocol.Budgets, v float64) { u := uint64(v); b.SideEffects = &u }},
}

const dimNames = "money, tokens, toolCalls, computeSeconds, wallClockSeconds or sideEffects"

// setDim sets dimension dim of b from text v, once.
func setDim(b *protocol.Budgets, dim, v string, seen map[string]bool) error {
	d, ok := budgetDims[dim]
	if !ok {
		return fmt.Errorf("unknown dimension %q: want %s", dim, dimNames)
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) || d.integer && (n != math.Trunc(n) || n > 1<<53) {
		kind := "a number"
		if d.integer {
			kind = "a whole number"
		}
		return fmt.Errorf("%s %q: want %s >= 0", dim, v, kind)
	}
	if seen[dim] {
		return fmt.Errorf("%s given twice", dim)
	}
	seen[dim] = true
	d.set(b, n)
	return nil
}

// parseCosts reads --cost values CAP:DIM=N into the expected cost of one
// run per capability id. Wall-clock is not a cost: --estimate and the
// observed runs say it.
func parseCosts(values []string) (map[string]protocol.Budgets, error) {
	out := map[string]protocol.Budgets{}
	seen := map[string]map[string]bool{}
	for _, v := range values {
		lhs, n, ok := strings.Cut(v, "=")
		capID, dim, ok2 := strings.Cut(lhs, ":")
		if !ok || !ok2 || capID == "" {
			return nil, fmt.Errorf("--cost %q: want CAP:DIM=N, DIM one of %s", v, dimNames)
		}
		if dim == "wallClockSeconds" {
			return nil, fmt.Errorf("--cost %q: a run's wall-clock is --estimate's (then the observed runs'), not a cost", v)
		}
		if seen[capID] == nil {
			seen[capID] = map[string]bool{}
		}
		b := out[capID]
		if err := setDim(&b, dim, n, seen[capID]); err != nil {
			return nil, fmt.Errorf("--cost %s: %v", capID, err)
		}
		out[capID] = b
	}
	return out, nil
}

// parseLimits reads --limit values DIM=N.
func parseLimits(values []string) (protocol.Budgets, error) {
	var out protocol.Budgets
	seen := map[string]bool{}
	for _, v := range values {
		dim, n, ok := strings.Cut(v, "=")
		if !ok {
			return out, fmt.Errorf("--limit %q: want DIM=N, DIM one of %s", v, dimNames)
		}
		if err := setDim(&out, dim, n, seen); err != nil {
			return out, fmt.Errorf("--limit: %v", err)
		}
	}
	return out, nil
}
