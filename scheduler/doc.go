// Package scheduler is the worker-owned global scheduler (spec 11.1): weighted
// fair sharing of slot-time across Groups, starvation-free priority within a
// Group, eligibility, preemption victims, selection basis and schedule
// disclosure. It is pure and deterministic: time comes in as an argument; it
// reads no clock, does no I/O and starts no goroutine (internal/deptest checks).
//
// # Across Groups
//
// Each Group has a weight w (its own weight × the organization priority
// class multiplier) and an optional quota q of concurrent slots. Its service
// svc is the slot-time it has been charged: finished runs at their actual
// length, running ones at max(elapsed, estimate) — the estimate is charged at
// start so that several slots freeing at once do not all go to one Group.
// Virtual time is svc/w. A ready Group (eligible item, under quota) with the
// smallest virtual time gets each free slot: start-time fair queuing over
// slot-time, one heap over ready Groups. Virtual times that tie (backlogged
// Groups with like runs tie at every round's start) go by virtual finish
// time, (svc + the estimate of the Group's next item in aging order)/w, then
// by id, so the heavy Groups are served at a round's start, not its end. On
// one slot with like runs of length l, a backlogged Group then strays from
// its weighted share of slot-time by at most SFQ's l·(W + (G−2)·w)/W: one
// run for two Groups, and within one run for sets such as 1:2:4, 1:2:3:4:5
// or 3:5:7 (by id, 1:2:4 lagged 8/7 of a run). When one Group outweighs the
// rest (1:1:8 lags 1.4 runs) no tie-break helps; a one-run bound for every
// weight set would take WF2Q's eligibility test (TestLagWithinOneQuantum,
// TestPropertyLagEqualRuns). V only grows: at each pick it moves up to
// the picked Group's virtual time of slot-time used (a running item counts
// the time it has run, not the estimate charged for it, which a run that
// ends sooner gives back), and when a Group stops being active, to the
// least such virtual time of the Groups still active, or to its own when
// it was the last. An idle Group that becomes ready joins at max(own, V),
// so sleeping, or waiting with nothing eligible for its own runs to end,
// banks no credit, and another Group's over-estimated charges are no debt
// (TestJoinAtServiceNotEstimate: a 4:2 pair whose long tests end one
// after the other then shares its loads 2:1, whichever ended first); a
// Group coming back under its quota keeps at most q × its mean run of
// credit.
//
// # Within a Group
//
// An item's aging key is ta = enqueue + MaxWait(urgency) × ImpactPercent/100
// (defaults: low 5m, normal 1m, high 10s, critical 1s; impact low 100%,
// medium 80%, high 60%, critical 40%). The key is fixed while the item waits,
// so ordering by it makes urgency decide among fresh items while age
// overtakes urgency, with no rescans; preemption and priority changes keep
// the first enqueue time. Deadline items whose slack is short (deadline −
// estimate ≤ now + SlackWindow) move, once, into an earliest-deadline-first
// heap that goes before the aging order. An item past its key is overdue:
// after EDFBurst (B, default 4) deadline picks have passed over it, it goes.
// The coordinator's urgency is thus an input to the key, never an override.
//
// # Starvation bound
//
// Let S be the slot count, W the sum of all Group weights, and for x's Group
// g: w its weight, q = min(quota, S); Q = Σ min(q_h, S) over the other
// Groups; D* the longest single occupancy of a slot (a run to its end or to
// its checkpoint) or charged estimate, whichever is larger. Define
//
//	R(k) = (k + q)·D*·max(W/(w·S), 1/q) + ((W − w)·q·D*/w + (Q + S)·D*)/S
//
// the longest a continuously backlogged Group waits for k picks: it receives
// at least min(w·S/W, q) slots' worth of slot-time less a constant lag (the
// second term: other Groups' charges of one run each, and g's own debt from
// runs charged before it waited). Then an eligible item x of urgency u
// starts within
//
//	wait(x) ≤ MaxWait(u) + R((A + 1)(B + 1))
//
// of its enqueue, where A counts g's items still unfinished at x's aging key
// that have a smaller key (all arrived earlier than ta − min MaxWait, so A
// is bounded by g's own backlog, never by other Groups or later arrivals).
// An item first in its Group's order starts within R(1): a low item in a
// weight-1 Group under a flood of critical work elsewhere waits at most
// (1 + q)·D*·max(W/S, 1/q) + ((W − 1)·q + Q + S)·D*/S — with S = 1, two
// weight-1 Groups and no quotas, 7·D*. TestStarvationBoundUnderCriticalFlood
// and the rapid property TestPropertyStarvationBound check this bound;
// TestPropertyFairShare checks that backlogged Groups stay within
// (2S + G)·D* of their weighted share of slot-time.
//
// Deadlines: with every deadline's slack inside SlackWindow (default 30s)
// and no item overdue, the order is earliest deadline first, so a load that
// non-preemptive EDF schedules without a miss has no miss here
// (TestPropertyEDFFeasible). When deadlines and the aging bound conflict the
// bound wins: anti-starvation is a MUST of 11.1, deadlines a SHOULD.
//
// # Preemption
//
// Preempt names a victim when a pressing queued item (deadline at risk,
// overdue, or critical) cannot start: the lowest-priority preemptible running
// item ranked below it, from its own Group, or from a Group that stays at or
// above its whole-slot fair share while the candidate's Group is below its
// share and behind in virtual time. An item that started only after its aging
// bound is never a victim, and a deadline candidate whose latest start is
// after the next expected slot release waits instead. Preemption is
// cooperative (11.3): the victim keeps its slot until Release, which then
// hands the slot to the candidate.
//
// A burst is served together: each call of Preempt names one more victim,
// for the next pressing item that no slot is promised to yet, so the
// caller calls it until it returns false and the victims all work towards
// their safe points at once (three critical items against runs whose safe
// point comes 5 s after the request start after 5 s each, not after 5, 9
// and 13 s: TestPreemptionBurstServedTogether). Each preemption in flight,
// and each slot a finished one keeps for its item until the next pick, is
// for a distinct waiting item that is still urgent, so there are never more
// victims than waiting items that need them (TestPropertyPicksMatchScan
// checks it after every step). Fair-share and quota checks count the
// preemptions in flight across Groups as done: several at once never take
// a Group past its share or another below its own
// (TestPreemptionBurstKeepsFairShare).
//
// No run is preempted needlessly, and a preempted item does not retake a
// slot while a more urgent one waits:
//   - a slot that frees while a preemption is in flight for an item goes to
//     that item, and the preemption is withdrawn: its victim counts as
//     running again (the runtime cannot take a request back; if the run
//     reaches its safe point anyway, Release queues it as usual) and may be
//     named again for another item, so the slot it frees goes to that one
//     (TestPreemptedItemDoesNotRetakeItsSlot);
//   - a slot that frees goes to a pressing item ahead of the common pick
//     when, with the common pick started, Preempt would name a victim for it:
//     serving it there leaves the slots as that preemption would, without
//     one (TestNoNeedlessPreemption);
//   - no victim is named for an item a free slot could take, and an item
//     whose promise ends (it started, was removed or blocked, or an Update
//     made it no longer urgent) releases it.
//
// A victim that does not reach a safe point in time is never forced:
// RefusePreempt puts it back to running, it is not named a victim again
// during that run, and the candidate takes the next slot that frees.
//
// # Cost
//
// Next, Finish, Release, Enqueue and Update are O(log n + log G + S) for n
// queued items in G Groups and S slots (amortized): per-Group item heaps
// whose nodes carry their sort keys and drop removed items lazily (heap.go),
// one heap of ready Groups, an id index of its own (index.go), no scan of
// items. TestPropertyPicksMatchScan checks every pick against a plain scan. With unlike slots
// (SlotResources) a pick may skip Groups whose next item fits no free slot:
// O(G log G) in that case, still independent of n. Preempt is O(G·S), plus
// O(p log n) for p slots promised in a Group; while a run that declares
// safe points holds a slot, a pick whose item is not pressing also asks
// whether a pressing one would preempt (the same cost), and with
// preemptions in flight it looks at their slots first (O(S)). Disclose is
// O(items of the item's own Group).
//
// # Disclosure
//
// Disclose reads the item's own Group (its order, running items, observed
// durations) and aggregate load only (slot count, free slots, total active
// weight); nothing of another Group — names, contents, durations, positions —
// enters it (TestDisclosureRevealsNothingOfOtherGroups). The start window
// runs from the best case (the Group's work ahead at its quota) plus the
// start latency (SetStartLatency, the caller's observed pick-to-lease time)
// to the fair-share case plus a slot wait, a second latency and the doubt
// of the estimates: (1 − confidence) of that wait. The confidence grows
// with the finished runs the estimate rests on, the Group's own or those
// the caller counts for the item (Item.Observed), and halves when
// saturated; blocked or offline it is 0.
package scheduler
