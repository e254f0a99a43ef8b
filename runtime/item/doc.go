// Package item is the worker's lifecycle of one WorkItem, pure:
// Step(item, input, now) returns the item as it is now and the effects
// the engine (package runtime) must carry out, in order. It reads no
// clock, store, connection or slot and starts no goroutine
// (internal/deptest holds the rule); what it needs of them comes in the
// input, and what it decides goes out as effects.
//
// Phases: Accepting (work.accept_offer out), Queued (owned, in the
// scheduler), Starting (work.start out), Running (in a slot under a
// lease), Finishing (the run ended; its commands go out, then the record
// is forgotten).
//
// Inputs: Viewed (the store's view of the item after a transaction),
// Offered (a standing offer, with what admission control judges it on),
// Renewal (a revised contract judged again), Picked (the scheduler chose
// it for a free slot), Answered (the authority's answer to one of the
// item's commands, or a send that got none), Launched (a lease granted
// for its start), StartFailed (the slot could not start the run),
// PreemptAsked (yield at a safe point), Ticked (the time passing: renewals,
// the lease's end, the offline grace, a preemption refused), RunEnded (a
// slot's outcome), Reconciled (an outcome held while offline, the worker
// back online), Due (the head command about to be sent).
//
// Admission control itself (Admission.Decide, spec 10.3) is a pure
// function of plain data: authorization, capability, critical extensions,
// capacity, deadline, dependency and the six budget dimensions, in that
// order.
//
// What each phase does with each input (— : no change of phase):
//
//	input \ phase           Accepting        Queued            Starting            Running             Finishing
//	Viewed                  not offered any  owned: Enqueue or Launch under a       lease not shown:    re-offered under a newer
//	                        more: Drop       RenewAcceptance;   lease of this       LoseLease; new      epoch: DropCommands,
//	                                         lost start answer: session; not ours:  expiry: Renewed     Forget, Created
//	                                         Adopt; else Drop   EndRun, Drop
//	                        (no record: an offer to this worker not judged yet → Admit; owned and queued → Created)
//	                                         revised contract: RenewAcceptance; refused already: Drop;
//	                                         its acceptance out: Enqueue held
//	Offered (no record)     admitted: → Accepting held: Created, Enqueue, Send accept_offer; refused: Unschedule,
//	                        Declined; ambiguous: Ambiguous (nothing decided while a record is here)
//	Renewal                 —                accepted: Enqueue  —                   —                   —
//	                                         held, Send accept_offer;
//	                                         refused: → Finishing,
//	                                         Declined, Send work.fail
//	Picked                  Unpick           → Starting: Send   Unpick              Unpick              Unpick
//	                                         work.start (resume), or Launch (a lost start's lease)
//	PreemptAsked            —                —                 — (timed: asked      → Preempt, once     —
//	                                                           once it runs)
//	Ticked                  —                —                 —                   renewal due: Send lease.renew
//	                                                                               (offline BufferRenewal); ended by
//	                                                                               the worker's clock: LoseLease;
//	                                                                               offline: ExtendSlot to the grace,
//	                                                                               Preempt 2 ticks before it; no safe
//	                                                                               point in PreemptTimeout: RefusePreemption
//	Launched                → Running: StartRun (attempt = PriorAttempts+1)         —  (never two runs)
//	StartFailed             —                —                 —                   → Finishing: EndRun, Send work.fail
//	Answered, retryable     Again: same bytes after RetryBackoff (INTERNAL_ERROR, a lost answer), or built again
//	  or rebuildable        (stale, MEMBERSHIP_STALE, ACTION_ID_COLLISION; AUTH_INVALID_SIGNATURE at /issuedAt after
//	                        a back-off); REVISION_CONFLICT on a revisioned command: HoldConflict      (any phase, —)
//	Answered accept_offer   refused: RefuseOffer, Drop;   renewal: Reaccepted,  —                   —                   —
//	                        conflict: Drop, Sync          Sync; refused: held
//	Answered work.start     —                —                 applied: Sync; fenced: EndRun, Drop;  —                  —
//	                                                           renewal needed: → Queued ForceRenew;
//	                                                           else → Queued, Hold, HoldGate
//	Answered lease.renew    —                —                 —                   RenewAnswered; fenced: LoseLease
//	Answered checkpoint     —                —                 —                   —                   ReleaseAfterCheckpoint;
//	                                                                                                   applied: → Queued, Sync
//	Answered work.submit    —                —                 —                   —                   applied: Track success;
//	                                                                                                   refused: Decided, and while
//	                                                                                                   the lease is ours Send work.fail
//	RunEnded                —                —                 —                   → Finishing: Checkpoint (preempted), Send submit /
//	                                                                               Block / Send fail, HoldOutcome (offline); late
//	                                                                               (lost, or the lease ended by the worker's clock):
//	                                                                               Late, nothing sent, Forget, Sync
//	Reconciled              —                —                 —                   —                   Send the held outcome, or
//	                                                                                                   Late when its lease ended
//	Due submit/block/fail   —                —                 —                   —                   Withhold under a lease the
//	                                                                                                   worker's clock ended
//	Due (any command)       Wait: no membership epoch yet, or the one called stale; a held conflict; a revisioned
//	                        command before the projection has its own previous events; a back-off (any phase, —)
//
// Every answer but a retry is Settled (off the chain) and ends with Next
// (the next command, or the record forgotten once a finishing item has
// nothing left to send). A send that got no answer never settles a
// command: it is sent again while the worker runs, and stays in the
// outbox while it stops (Unanswered).
//
// The invariants, checked on every scenario step and by a rapid property
// over any sequence of inputs (property_test.go): only a granted lease
// (Launched) puts an item into Running, never while a run is under way or
// finishing, so no item runs twice; no command names a lease the worker's clock has ended; a
// work.submit comes only from a completed run, under its lease, with the
// evidence the handler returned.
//
// The scenario files under testdata (one per rule family) are the rules
// as transcripts: `go test ./runtime/item/ -run TestScenarios -rewrite`
// regenerates their outputs.
//
// What stays in package runtime is I/O: reading the store, the handlers'
// clarifying questions (slow ones asked in the background), the
// scheduler's picks, disclosures and victims, signing and sending, the
// slots, the offline buffer and Monitor.
package item
