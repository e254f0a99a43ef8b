package slots

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// DefaultClarifyTimeout bounds one clarify exchange with an external
// program, from its start to its exit.
const DefaultClarifyTimeout = 10 * time.Second

// OfferClarifier is a Handler that is asked about an offered contract off
// the worker's decision loop, because answering takes time (an external
// program, ClarifyingExec): the worker holds its decision on the offer
// until the answer comes, then raises the questions as a Clarifier's
// (spec 10.1) or, with none, judges the offer. An error refuses the offer:
// the worker cannot tell whether the contract is ambiguous.
type OfferClarifier interface {
	ClarifyOffer(ctx context.Context, q ClarifyRequest) ([]string, error)
}

// ClarifyRequest is what an OfferClarifier is asked about.
type ClarifyRequest struct {
	GroupID, MissionID, WorkItemID, OfferID string
	Contract                                protocol.WorkContract
	// Extensions are the offer's extensions the worker interprets, as in
	// Work.Extensions.
	Extensions protocol.Extensions
	// Dir is where the program gets its private working directory.
	Dir string
}

// ClarifyingExec is an Exec whose program is also asked, before the
// worker accepts an offer of its capability, what in the contract it
// cannot act on without guessing: a separate, short run of the program
// with the clarify message of mwp-slot/1 (EXTERNAL.md).
type ClarifyingExec struct {
	Exec
	// Timeout bounds the exchange; 0 means DefaultClarifyTimeout.
	Timeout time.Duration
}

type (
	clarifyMsg struct {
		Type       string                `json:"type"`
		Protocol   string                `json:"protocol"`
		Offer      clarifyOfferMsg       `json:"offer"`
		Contract   protocol.WorkContract `json:"contract"`
		Extensions protocol.Extensions   `json:"extensions,omitzero"`
	}
	clarifyOfferMsg struct {
		GroupID    string `json:"groupId"`
		MissionID  string `json:"missionId"`
		WorkItemID string `json:"workItemId"`
		OfferID    string `json:"offerId"`
	}
	// clarificationMsg is the program's one answer to clarify.
	clarificationMsg struct {
		Type      string   `json:"type"`
		Questions []string `json:"questions"`
	}
)

// MaxClarifyQuestions bounds the questions of one answer; each is at most
// MaxQuestionBytes.
const (
	MaxClarifyQuestions = 16
	MaxQuestionBytes    = 2048
)

// ClarifyOffer runs the program once with the clarify message and returns
// its questions (none: nothing is ambiguous). The program gets no
// credential and no lease: it holds none yet. Its whole process group is
// killed when the exchange ends, and past the timeout.
func (e ClarifyingExec) ClarifyOffer(ctx context.Context, q ClarifyRequest) ([]string, error) {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultClarifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := os.MkdirAll(q.Dir, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(q.Dir, "clarify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	msg, err := json.Marshal(clarifyMsg{Type: "clarify", Protocol: ExecProtocol, Contract: q.Contract, Extensions: q.Extensions,
		Offer: clarifyOfferMsg{GroupID: q.GroupID, MissionID: q.MissionID, WorkItemID: q.WorkItemID, OfferID: q.OfferID}})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.Path, e.Args...)
	cmd.Dir = dir
	cmd.Env = e.clarifyEnviron(dir, q)
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("slots: start %s: %w", e.Path, err)
	}
	trackProcess(cmd)
	defer untrackProcess(cmd)
	// The reader answers with the line, then with what follows it: more
	// output is a violation, EOF means the program closed its stdout.
	answer, rest := make(chan clarifyAnswer, 1), make(chan bool, 1)
	go func() {
		br := bufio.NewReaderSize(stdout, 64<<10)
		a := readClarification(br)
		answer <- a
		if a.err != nil {
			rest <- false
			return
		}
		b, _ := br.Peek(1)
		rest <- len(b) > 0
		_, _ = io.Copy(io.Discard, br)
	}()
	_, _ = stdin.Write(append(msg, '\n')) // a write error means the program is gone; its exit says why
	stdin.Close()
	end := func() error { // kill the group, reap the program
		killGroup(cmd)
		<-rest
		err := cmd.Wait()
		waitGroupGone(cmd, time.Second)
		return err
	}
	var a clarifyAnswer
	select {
	case a = <-answer:
	case <-ctx.Done():
		end()
		return nil, fmt.Errorf("slots: %s did not answer clarify within %v%s", e.Path, timeout, stderr.suffix())
	}
	if a.err != nil {
		end()
		return nil, fmt.Errorf("slots: %s: clarify: %w%s", e.Path, a.err, stderr.suffix())
	}
	// The answer is in: the program has until the timeout to close its
	// output and exit.
	select {
	case more := <-rest:
		rest <- more // for end
		if more {
			end()
			return nil, fmt.Errorf("slots: %s: clarify: %w", e.Path, violation("output line 2: nothing may follow the clarification"))
		}
	case <-ctx.Done():
		end()
		return nil, fmt.Errorf("slots: %s answered clarify but did not exit within %v%s", e.Path, timeout, stderr.suffix())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err2 error
	select {
	case err2 = <-exited:
	case <-ctx.Done():
		killGroup(cmd)
		if err2 = <-exited; err2 == nil {
			err2 = ctx.Err()
		}
	}
	killGroup(cmd) // nothing it started outlives the exchange
	waitGroupGone(cmd, time.Second)
	if err2 != nil {
		return nil, fmt.Errorf("slots: %s answered clarify but exited with %v%s", e.Path, err2, stderr.suffix())
	}
	return a.questions, nil
}

type clarifyAnswer struct {
	questions []string
	err       error
}

// readClarification reads the program's one line and checks it as strictly
// as any line of mwp-slot/1, then that nothing follows it.
func readClarification(br *bufio.Reader) clarifyAnswer {
	line, err := readLine(br)
	if err != nil {
		if len(line) == 0 {
			return clarifyAnswer{err: violation("the program exited without a clarification")}
		}
		return clarifyAnswer{err: fmt.Errorf("output line 1: %w", err)}
	}
	qs, err := decodeClarification(line)
	if err != nil {
		return clarifyAnswer{err: fmt.Errorf("output line 1: %w", err)}
	}
	return clarifyAnswer{questions: qs}
}

// decodeClarification strictly decodes a clarification line: every
// failure is a PROTOCOL_VIOLATION *protocol.Error.
func decodeClarification(line []byte) ([]string, error) {
	parsed, obj, err := parseLine(line)
	if err != nil {
		return nil, err
	}
	if typ, _ := obj["type"].(string); typ != "clarification" {
		return nil, violation("the answer to clarify must be a clarification, not %q", typ)
	}
	var m clarificationMsg
	if err := protocol.DecodeExactParsed(line, parsed, &m, protocol.CodeProtocolViolation); err != nil {
		return nil, err
	}
	if _, ok := obj["questions"]; !ok || m.Questions == nil {
		return nil, violation("questions: required (an empty array: nothing is ambiguous)")
	}
	if len(m.Questions) > MaxClarifyQuestions {
		return nil, violation("questions: at most %d", MaxClarifyQuestions)
	}
	for i, q := range m.Questions {
		if q == "" || len(q) > MaxQuestionBytes {
			return nil, violation("questions[%d]: between 1 and %d bytes", i, MaxQuestionBytes)
		}
	}
	return m.Questions, nil
}

// clarifyEnviron is the run's clean environment without what a run under
// a lease gets: the offer instead of the lease, no credential.
func (e ClarifyingExec) clarifyEnviron(dir string, q ClarifyRequest) []string {
	env := map[string]string{}
	for k, v := range e.Env {
		env[k] = v
	}
	for k, v := range map[string]string{
		"PATH": cleanPath, "HOME": dir, "TMPDIR": dir, "MWP_WORKDIR": dir,
		"MWP_GROUP_ID": q.GroupID, "MWP_WORK_ITEM_ID": q.WorkItemID, "MWP_OFFER_ID": q.OfferID,
	} {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "MWP_CREDENTIAL" || k == "MWP_CREDENTIAL_EXPIRES_AT" || k == "MWP_LEASE_ID" || k == "MWP_LEASE_EXPIRES_AT" {
			continue // Exec.Env cannot set them (environ), nor here
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
