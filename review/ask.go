package review

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxTries bounds how often an unreadable answer is asked again.
const maxTries = 3

// maxComment bounds one line of a comment.
const maxComment = 8 << 10

// ErrNoDecision is returned when the terminal closed or the human quit
// without deciding.
var ErrNoDecision = errors.New("no decision taken")

// Answer is what the human decided: approve, or request changes with one
// change per line of Comment.
type Answer struct {
	Approve bool
	Comment string
}

// Ask asks on a terminal (in, out) approve, request changes or quit, with
// an optional one-line comment for an approval and the changes, one per
// line up to an empty one, for a request. Quitting, the input ending and
// a request without a change are ErrNoDecision.
func Ask(in io.Reader, out io.Writer) (Answer, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), maxComment+1)
	answer := ""
	for try := 0; ; try++ {
		if try == maxTries {
			return Answer{}, fmt.Errorf("%w: no valid answer after %d tries", ErrNoDecision, maxTries)
		}
		if _, err := fmt.Fprint(out, "Approve, request changes, or quit? [a/r/q]: "); err != nil {
			return Answer{}, err
		}
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return Answer{}, fmt.Errorf("read decision: %w", err)
			}
			return Answer{}, fmt.Errorf("%w: input ended", ErrNoDecision)
		}
		answer = strings.ToLower(strings.TrimSpace(sc.Text()))
		if answer == "a" || answer == "approve" || answer == "r" || answer == "request changes" || answer == "q" || answer == "quit" {
			break
		}
		fmt.Fprint(out, "Please answer a, r or q.\n")
	}
	var a Answer
	switch answer[0] {
	case 'q':
		return Answer{}, fmt.Errorf("%w: quit", ErrNoDecision)
	case 'a':
		a.Approve = true
		fmt.Fprint(out, "Comment (optional, one line): ")
		if sc.Scan() {
			a.Comment = sc.Text()
		}
	case 'r':
		fmt.Fprint(out, "What must change? One change per line; an empty line ends.\n")
		var lines []string
		for sc.Scan() && strings.TrimSpace(sc.Text()) != "" {
			lines = append(lines, sc.Text())
		}
		a.Comment = strings.Join(lines, "\n")
		if len(ChangeLines(a.Comment)) == 0 {
			return Answer{}, fmt.Errorf("%w: requesting changes needs at least one change", ErrNoDecision)
		}
	}
	if err := sc.Err(); err != nil {
		return Answer{}, fmt.Errorf("read decision: %w", err)
	}
	return a, nil
}

// ChangeLines are the changes a request-changes comment asks for: its
// non-blank lines, trimmed.
func ChangeLines(comment string) []string {
	var out []string
	for line := range strings.Lines(comment) {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return out
}
