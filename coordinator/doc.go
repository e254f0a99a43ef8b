// Package coordinator runs one plan's Mission (package plan, docs/plans.md)
// as its coordinator agent: it waits for its assignment, renews its
// coordinator lease at half-life, adds the candidate workers as members,
// authorizes every stage, offers each item once its dependencies are met,
// reviews every submission in the order of spec 13.2, retries and re-offers
// per the contract, and submits the Mission for its approvers' approval.
//
// It is split like the rest of the module: a view of the Group's log that
// group.Fold keeps (plus what the state machine does not hold and review
// and ranking need: memberships, manifests per WorkItem, submissions, each
// agent's record), a pure decide (view, plan, workers, time → actions in
// priority order), and a runner that does the I/O: it reads and waits on
// the log, fetches artifacts and runs checks through Config, and signs its
// own commands (protocol.BuildCommand) with the session epoch the
// Authority reports and the membership and coordinator epochs of its view.
// Each command's action id derives from the Group, the Mission, the log
// position it was decided at and the action (kind, item or agent, input):
// "act-c-<position>-<kind>-" and 32 hex digits of their hash. A
// coordinator restarted on the same log decides and names the same, so
// nothing is sent twice with different ids; and one coordinator agent
// runs any number of Missions, one after another or at once, since no
// two of its Groups share an id (the authority keys its records by
// (actor, actionId) across Groups). A command refused as
// ACTION_ID_COLLISION is built again at once under the next id of the
// same derivation (a rebuild count in the hash), at most 8 times.
//
// Offers: an exclusive item goes to one worker at a time, the best ranked
// of the eligible ones (an active member whose Agent Card satisfies the
// required capability and version range); an urgent one (high, critical)
// to at most MaxCandidates. Rank: reliability in this log (results
// accepted minus failures and lapsed ownerships), then the start its last
// schedule disclosure promised, then the agent id. Workers already offered
// the item this round and owners whose ownership of it lapsed are passed
// over while another is eligible. The workers' Agent Cards are read at
// start and again (at most every CardRefresh) while an item waits with no
// eligible worker, so a worker that registers a new card gets work
// without a restart. Each candidate carries its selection
// basis (spec 10.3) naming the rules applied.
//
// Review (spec 13.2): artifact integrity (the manifest published for this
// item, bytes fetched and hashed, size, producer; every required output
// present; passing evidence for every acceptance criterion), then the
// stage's checks, each run on the outputs (files named after the output,
// with the media type's extension) by Config.RunCheck, then the semantic
// step: the verdict of the plan's reviewer stage over this stage — the
// reviewer's submitted evidence about it (records whose subject is the
// stage, else all of them; any non-passing record rejects). The stage
// waits for a verdict newer than its submission, unless the reviewer
// cannot run before this stage is verified (another stage between them
// needs it verified): then it is accepted on the first two steps and the
// verdict is checked when the reviewer's own submission is reviewed. A
// reviewer passes only when its verdict passes every stage it reviews; a
// rejected stage and its reviewer are both failed and run again.
//
// Failures: a failed item is offered again after the contract's backoff
// while attempts remain; past them the Mission is terminated with the
// reason (plan files have no other failure policy in version 1). A missed
// start deadline or an expired lease is fenced by the next offer, whose
// ownership epoch is higher, made to another worker when there is one.
//
// A program that embeds the coordinator can add to the plan (hooks.go):
// Rules, review rules written in Go that the checks step and the
// semantic step run on top of the plan's; Inputs, artifacts the
// coordinator makes, stores and publishes under the first stage that
// reads them before offering it; RequireProvenance, an integrity check
// that every output's manifest lists the item's inputs; and Rework, the
// stages that answer each change request (the request itself is
// published as their input, and the Mission is submitted again only once
// they are verified). Without Rework a change request is answered by
// submitting again.
//
// The Authority interface is all the coordinator knows of the authority:
// authority-lite/embed.Actor in process, package remote over the wire.
package coordinator
