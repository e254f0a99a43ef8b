// Package poc is the proof of concept of spec 22: two concurrent
// software-development missions sharing a worker, a human approval page and
// the fault-injection suite.
//
// Status (issue 7, in part). Built and tested, against small interfaces with
// fakes in the tests:
//
//   - The human approval page (ApprovalServer, ListenLocal on 127.0.0.1):
//     Missions awaiting approval with their evidence and artifact manifests,
//     and Approve / Request changes forms that send mission.approve and
//     mission.request_changes signed by the human MissionOwner, carrying the
//     revision the page showed (a stale page gets REVISION_CONFLICT). The page
//     runs no script; untrusted text is escaped; posts need a per-server CSRF
//     token and pass Go's cross-origin check; only loopback Host names are
//     served; artifacts are hash-checked against their manifest on every
//     download. A headless-Chromium test clicks both buttons.
//   - The terminal fallback (ApproveFromTerminal).
//   - The run report (Report: JSON and terminal tables, documented in
//     REPORT.md), the pure per-Group share/wait/preemption computation
//     (ComputeGroups) and the SVG timeline (RenderTimeline, WriteTimeline).
//
// AutoApprove is what --auto-approve will call.
//
// Not yet built: the driver that runs the two missions on the authority,
// runtime and slots, the coordinator agents and mission graphs, the fault
// suite, the ApprovalSource backed by the authority, and the CLI wiring
// (`mwp-worker poc`, `poc approve MISSION`, `--auto-approve`, `--json`).
package poc
