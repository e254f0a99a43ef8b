package poc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// maxPromptTries bounds how often an unreadable answer is asked again.
const maxPromptTries = 3

// ErrNoDecision is returned when the terminal closed or the human quit
// without deciding.
var ErrNoDecision = errors.New("poc: no decision taken")

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
	w := &errWriter{w: out}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), maxCommentBytes+1)
	d := Decision{MissionID: p.MissionID, ExpectedRevision: p.Revision}
	answer := ""
	for try := 0; ; try++ {
		if try == maxPromptTries {
			return fmt.Errorf("%w: no valid answer after %d tries", ErrNoDecision, maxPromptTries)
		}
		w.printf("Approve, request changes, or quit? [a/r/q]: ")
		if !sc.Scan() {
			return fmt.Errorf("%w: input ended", ErrNoDecision)
		}
		answer = strings.ToLower(strings.TrimSpace(sc.Text()))
		if answer == "a" || answer == "approve" || answer == "r" || answer == "request changes" || answer == "q" || answer == "quit" {
			break
		}
		w.printf("Please answer a, r or q.\n")
	}
	switch answer[0] {
	case 'q':
		return fmt.Errorf("%w: quit", ErrNoDecision)
	case 'a':
		d.Approve = true
		w.printf("Comment (optional, one line): ")
		if sc.Scan() {
			d.Comment = sc.Text()
		}
	case 'r':
		w.printf("What must change? One change per line; an empty line ends.\n")
		var lines []string
		for sc.Scan() && strings.TrimSpace(sc.Text()) != "" {
			lines = append(lines, sc.Text())
		}
		d.Comment = strings.Join(lines, "\n")
		if len(ChangeLines(d.Comment)) == 0 {
			return fmt.Errorf("%w: requesting changes needs at least one change", ErrNoDecision)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("poc: read decision: %w", err)
	}
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
