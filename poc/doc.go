// Package poc is the proof of concept of spec 22: two concurrent
// software-development missions sharing a worker, a human approval page and
// the fault-injection suite. `mwp-worker poc` runs it (Run).
//
// The run (driver*.go): authority-lite embedded and served over real wss on
// 127.0.0.1; worker-1 (runtime.Worker, two slots) serves Mission A (grp-a,
// priority high: requirements → implementation → testing → code review and
// sixteen parallel load stages → two soak stages → integration → human
// approval) and Mission B (grp-b, normal: implementation → testing → review
// and sixteen load stages) at the same time. The load stages
// (handlers_load.go: checkpointed steps of a SHA-256 chain the reviewer
// recomputes) keep both Groups backlogged on the shared worker at once (it
// takes them all: queueDepth), equal backlogs against 4:2 weights, so the
// report's contention window (ComputeContention) shows each Group's share
// of slot-time against its weight and against what longest-queue-first
// would have given. While the soak stages (safe points a second apart, low
// urgency) fill both slots, the driver offers a critical hotfix in every
// run (driver_hotfix.go): a busy soak run is asked to yield and does at its
// next safe point (ComputePreemptions); worker-2 is
// registered and started only when a fault needs a second worker. Each
// Mission has an in-process coordinator agent: package coordinator driving
// the Mission graph as a plan (plans.go: MissionSpec.Plan), which adds
// workers, authorizes and offers stages with structured selection bases,
// reviews submissions in the order of spec 13.2 (artifact integrity with
// provenance required, then the PoC's rules in Go, coordinator_rules.go:
// each stage kind's business rules and a rule-based semantic review of the
// diff), re-offers after a lease lapses, answers a change request with
// rework stages (MissionSpec.Rework) and submits the Mission for approval;
// coordinator.go adds Stop and the record of reviews the faults read. The
// handlers (handlers*.go) do real work in the slot's directory on a tiny Go
// project: a requirements note, a unified-diff patch, `go test` on the
// patched project, a review, and the integration into a repository behind
// an idempotency-keyed effect log (effects.go). Each worker reaches the
// authority through a relay the driver can cut (driver_proxy.go).
//
// The human: the approval page (web*.go) says how many Missions await
// approval and lays each out for a reviewer (web_review.go): the decision
// first, then the final diff inline, each stage's text outputs (test report,
// review notes), the evidence once per stage with the review methods as
// columns, and the budgets used; after a decision it says what still waits.
// It sends signed mission.approve / mission.request_changes as the
// MissionOwner; --auto-approve approves
// instead (AutoApprove). From another terminal, `mwp-worker poc approve
// MISSION --data DIR` reads DIR/approval.json (the page's URL and a bearer
// token, mode 0600), shows the evidence, signs the decision with the run's
// MissionOwner key and sends it through the page's API (web_api.go); with
// --decision it does so without asking (ApproveNonInteractive).
//
// Faults (faults*.go, driver_faults.go) are injected for real and journaled,
// each at a moment the driver makes: hold points in worker-1's handlers
// (Holds, handlers_hold.go) keep runs where a fault needs them (both slots
// busy for priority-arrival, a run before its first checkpoint for
// lease-expiry) until it is injected. Afterwards CheckFaults and
// CheckInvariants judge the run from what happened (the authority's log and
// audit store, the worker stores, the effect log, and the workers' own
// counters and logs in observations.jsonl, observe.go); the journal only
// says where and when to look. Then the
// report (report*.go, REPORT.md) and an SVG timeline are written. The run
// passes only when every chosen fault was injected and held and every
// invariant held (Report.Problems).
package poc
