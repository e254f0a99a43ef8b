package poc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/review"
)

// ErrNoDecision is returned when the terminal closed or the human quit
// without deciding.
var ErrNoDecision = review.ErrNoDecision

// ApproveFromTerminal is the terminal fallback of the approval page: it
// prints the evidence summary of missionID, asks approve or request changes
// (with the changes, one per line), signs and submits the decision with
// approver at the time clk tells, and prints what the authority answered.
// A refusal is returned as an error wrapping the *protocol.Error.
func ApproveFromTerminal(ctx context.Context, in io.Reader, out io.Writer, src ApprovalSource, approver Approver, clk clock.Clock, missionID string) error {
	return AskDecision(ctx, in, out, src, approver, clk, missionID, func(w io.Writer, p PendingMission) error {
		ew := &errWriter{w: w}
		printPending(ew, p)
		return ew.err
	})
}

// AskDecision is ApproveFromTerminal with the evidence shown by show: a
// caller that knows the plan (mwp-worker up) shows each stage's evidence
// and outputs by name, which the approval projection does not carry.
func AskDecision(ctx context.Context, in io.Reader, out io.Writer, src ApprovalSource, approver Approver, clk clock.Clock, missionID string,
	show func(io.Writer, PendingMission) error) error {
	p, err := FindPending(ctx, src, missionID)
	if err != nil {
		return err
	}
	if err := show(out, p); err != nil {
		return err
	}
	ans, err := review.Ask(in, out)
	if err != nil {
		return err
	}
	d := Decision{MissionID: p.MissionID, ExpectedRevision: p.Revision, Approve: ans.Approve, Comment: ans.Comment}
	w := &errWriter{w: out}
	return submit(ctx, w, approver, clk, d, p)
}

// ApproveNonInteractive is ApproveFromTerminal for scripts: the decision
// comes in (approve, or request changes with one change per non-blank line
// of comment) instead of being asked. It signs the same Command with
// approver, submits it the same way and prints one line, `mission M: TYPE
// accepted, event E (G #SEQ)`: a script read the evidence beforehand. A
// refusal is returned as an error wrapping the *protocol.Error.
func ApproveNonInteractive(ctx context.Context, out io.Writer, src ApprovalSource, approver Approver, clk clock.Clock, missionID string, approve bool, comment string) error {
	if !approve && len(ChangeLines(comment)) == 0 {
		return fmt.Errorf("%w: requesting changes needs at least one change (a non-blank comment line)", ErrNoDecision)
	}
	p, err := FindPending(ctx, src, missionID)
	if err != nil {
		return err
	}
	w := &errWriter{w: out}
	d := Decision{MissionID: p.MissionID, ExpectedRevision: p.Revision, Approve: approve, Comment: comment}
	cmd, rec, err := approver.Decide(ctx, d, p, clk.Now())
	if err != nil {
		w.printf("mission %s: refused: %s: %s\n", terminalSafe(p.MissionID), protocol.CodeOf(err), terminalSafe(err.Error()))
		return err
	}
	w.printf("mission %s: %s accepted", terminalSafe(p.MissionID), cmd.Type)
	for _, e := range rec.Events {
		if e.Sequence != nil {
			w.printf(", event %s (%s #%d)", terminalSafe(e.EventID), terminalSafe(e.GroupID), *e.Sequence)
		} else {
			w.printf(", event %s (%s)", terminalSafe(e.EventID), terminalSafe(e.GroupID))
		}
	}
	w.printf("\n")
	return w.err
}

// submit signs and sends d and prints what the authority answered.
func submit(ctx context.Context, w *errWriter, approver Approver, clk clock.Clock, d Decision, p PendingMission) error {
	cmd, rec, err := approver.Decide(ctx, d, p, clk.Now())
	if err != nil {
		w.printf("Refused: %s: %s\n", protocol.CodeOf(err), terminalSafe(err.Error()))
		return err
	}
	w.printf("Accepted: %s (actionId %s)\n", cmd.Type, cmd.ActionID)
	for _, e := range rec.Events {
		seq := ""
		if e.Sequence != nil {
			seq = fmt.Sprintf(" #%d", *e.Sequence)
		}
		w.printf("  event %s %s%s\n", terminalSafe(e.EventID), terminalSafe(e.GroupID), seq)
	}
	return w.err
}

func printPending(w *errWriter, p PendingMission) {
	w.printf("Mission %s %q (group %s, revision %d) is awaiting approval since %s.\n",
		terminalSafe(p.MissionID), terminalSafe(p.Title), terminalSafe(p.GroupID), p.Revision, protocol.NewTime(p.SubmittedAt))
	w.printf("Summary:\n")
	for line := range strings.Lines(p.Summary) {
		w.printf("  %s\n", terminalSafe(strings.TrimRight(line, "\r\n")))
	}
	w.printf("Evidence (%d):\n", len(p.Evidence))
	for _, e := range p.Evidence {
		w.printf("  [%s] %s; criteria %s; method %s; by %s:%s at %s; artifacts %s\n",
			terminalSafe(string(e.Result)), terminalSafe(e.Subject), terminalSafe(strings.Join(e.Criteria, ", ")),
			terminalSafe(e.Method), e.Producer.Kind, terminalSafe(e.Producer.ID), e.Timestamp, terminalSafe(shortList(e.Artifacts)))
	}
	w.printf("Artifacts (%d):\n", len(p.Artifacts))
	for _, m := range p.Artifacts {
		w.printf("  %s %s %d bytes, work item %s, by %s\n", terminalSafe(m.ContentHash), terminalSafe(m.MediaType), m.Size,
			terminalSafe(m.WorkItemID), terminalSafe(m.Producer.AgentID))
	}
}

func shortList(digests []string) string {
	if len(digests) == 0 {
		return "none"
	}
	s := make([]string, len(digests))
	for i, d := range digests {
		s[i] = shortDigest(d)
	}
	return strings.Join(s, ", ")
}

// terminalSafe replaces control characters (escape sequences included) so
// untrusted evidence text cannot drive the human's terminal.
func terminalSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// errWriter keeps the first write error so printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// ReviewSource is where the terminal reads what it shows: the pending
// Missions, their Group's log and the artifacts.
type ReviewSource interface {
	ApprovalSource
	EventSource
}

// ShowReview is AskDecision's show with package review's review, the one
// every terminal shows before a decision: the Mission's stages in plan
// order with the handler's evidence, outputs by name with a preview and
// the coordinator's review in one line, then the summary.
func ShowReview(ctx context.Context, src ReviewSource) func(io.Writer, PendingMission) error {
	return func(w io.Writer, p PendingMission) error {
		evs, err := src.GroupEvents(ctx, p.GroupID)
		if err != nil {
			return fmt.Errorf("poc: read the log of %s: %w", p.GroupID, err)
		}
		v, err := review.Load(p.GroupID, evs, func(e json.RawMessage) []byte { return e })
		if err != nil {
			return err
		}
		return v.Show(ctx, w, p.Summary, src.ArtifactBytes)
	}
}
