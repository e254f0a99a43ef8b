package slots

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/missionweave/mwp-worker/checkpoint"
)

// incoming is one decoded line, or why it could not be decoded.
type incoming struct {
	msg any
	err error
}

// session is one program's conversation.
type session struct {
	w     *Work
	stdin io.WriteCloser
	lines chan incoming
	done  chan struct{}
	eof   chan struct{}

	mu   sync.Mutex // serializes writes and guards tool
	enc  *json.Encoder
	tool *pendingTool
}

type pendingTool struct {
	id     string
	goSent bool
	done   chan *toolDoneMsg
}

func (s *session) send(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A write error means the program is gone; its exit reports why.
	_ = s.enc.Encode(v)
}

// read decodes stdout line by line until EOF or a bad line.
func (s *session) read(r io.Reader) {
	defer close(s.eof)
	defer close(s.lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF && len(line) == 0 {
			return
		}
		var in incoming
		if err != nil && err != io.EOF {
			in.err = fmt.Errorf("slots: output line %d: %w", n, err)
		} else if in.msg, in.err = decodeLine(line); in.err != nil {
			in.err = fmt.Errorf("slots: output line %d: %w", n, in.err)
		}
		select {
		case s.lines <- in:
		case <-s.done:
			return
		}
		if in.err != nil {
			io.Copy(io.Discard, r) // let the program finish writing; it is being killed
			return
		}
	}
}

// drain discards what the reader still has, so it can reach EOF.
func (s *session) drain() {
	for range s.lines {
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineBytes {
			return nil, violation("line is over %d bytes", MaxLineBytes)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, violation("last line is not terminated by a newline")
		default:
			return line, err
		}
	}
}

// serve handles the program's messages until a final one (final true),
// a failure, or cancellation.
func (s *session) serve(ctx context.Context) (res Result, err error, final bool) {
	preempt := s.w.PreemptRequested()
	for {
		select {
		case <-ctx.Done():
			return Result{}, context.Cause(ctx), false
		case <-preempt:
			preempt = nil
			reason := "preempt"
			if s.w.leaseLost() {
				reason = "leaseLost"
			}
			s.send(replyMsg{Type: "preempt", Reason: reason})
		case in, ok := <-s.lines:
			if !ok {
				return Result{}, errors.New("slots: the program exited without a final message"), false
			}
			if in.err != nil {
				return Result{}, Permanent(in.err), false
			}
			if res, err, final, stop := s.handle(ctx, in.msg); stop {
				return res, err, final
			}
		}
	}
}

func (w *Work) leaseLost() bool {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.leaseLost
}

// handle serves one message; stop ends the conversation.
func (s *session) handle(ctx context.Context, msg any) (res Result, err error, final, stop bool) {
	w := s.w
	switch m := msg.(type) {
	case *progressMsg:
		if err := w.Progress(ctx, m.Progress); err != nil {
			s.send(errorReply("", "progress", err))
		}
	case *chargeMsg:
		if err := w.Charge(m.Usage); err != nil {
			s.send(errorReply("", "charge", err))
		}
	case *checkpointMsg:
		c, err := w.Checkpoint(ctx, m.state, checkpoint.Meta{Phase: m.Phase, Note: m.Note})
		if err != nil {
			s.send(errorReply(m.ID, "checkpoint", err))
		} else {
			s.send(replyMsg{Type: "checkpointed", ID: m.ID, CheckpointID: c.ID, Digest: c.Digest})
		}
	case *artifactMsg:
		d, err := w.Publish(ctx, Artifact{MediaType: m.MediaType, Schema: m.Schema, Data: m.data, Classification: m.Classification, ToolVersions: m.ToolVersions})
		if err != nil {
			s.send(errorReply(m.ID, "artifact", err))
		} else {
			s.send(replyMsg{Type: "published", ID: m.ID, Digest: d})
		}
	case *eventsMsg:
		evs, err := w.CitedEvents(ctx, m.FromSequence, m.Max)
		if err != nil {
			s.send(errorReply(m.ID, "events", err))
		} else {
			s.send(replyMsg{Type: "events", ID: m.ID, Events: &evs})
		}
	case *toolCallMsg:
		if err := s.startTool(ctx, m); err != nil {
			return Result{}, Permanent(err), false, true
		}
	case *toolDoneMsg:
		if err := s.toolDone(m); err != nil {
			return Result{}, Permanent(err), false, true
		}
	case *fetchMsg:
		s.fetch(ctx, m)
	case *blockMsg:
		err := w.Block(ctx, m.Resolution, m.state)
		if !errors.Is(err, ErrBlocked) {
			return Result{}, Permanent(fmt.Errorf("slots: block refused: %w", err)), false, true
		}
		return Result{}, err, true, true
	case *preemptedMsg:
		return Result{}, ErrPreempted, true, true
	case *failMsg:
		err := fmt.Errorf("slots: handler failed: %s", m.Reason)
		if m.Permanent {
			err = Permanent(err)
		}
		return Result{}, err, true, true
	case *resultMsg:
		return Result{Artifacts: m.Artifacts, Evidence: m.Evidence, Progress: m.Progress}, nil, true, true
	}
	return Result{}, nil, false, false
}

// startTool runs a toolCall through Work.ToolCall in its own goroutine:
// the serve loop must keep reading to receive the toolDone. One call may
// be outstanding at a time.
func (s *session) startTool(ctx context.Context, m *toolCallMsg) error {
	s.mu.Lock()
	if s.tool != nil {
		s.mu.Unlock()
		return violation("toolCall %q while %q is outstanding", m.ID, s.tool.id)
	}
	p := &pendingTool{id: m.ID, done: make(chan *toolDoneMsg, 1)}
	s.tool = p
	s.mu.Unlock()
	op := Op{ID: m.OpID, Tool: m.Tool, Operation: m.Operation, SideEffect: m.SideEffect,
		Risk: Risk{Class: m.Risk.Class, Irreversible: m.Risk.Irreversible, ExternallyVisible: m.Risk.ExternallyVisible}}
	if m.Cost != nil {
		op.Cost = *m.Cost
	}
	go func() {
		out, err := s.w.ToolCall(ctx, op, func(ctx context.Context, key string) ([]byte, error) {
			s.mu.Lock()
			p.goSent = true
			_ = s.enc.Encode(replyMsg{Type: "toolGo", ID: p.id, Key: key})
			s.mu.Unlock()
			select {
			case d := <-p.done:
				if d.Error != nil {
					return nil, errors.New(*d.Error)
				}
				return d.output, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-s.done:
				return nil, ErrEnded
			}
		})
		s.mu.Lock()
		s.tool = nil
		s.mu.Unlock()
		if err != nil {
			s.send(errorReply(p.id, "toolCall", err))
			return
		}
		o := base64.StdEncoding.EncodeToString(out)
		s.send(replyMsg{Type: "toolResult", ID: p.id, Output: &o})
	}()
	return nil
}

func (s *session) toolDone(m *toolDoneMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tool == nil || s.tool.id != m.ID || !s.tool.goSent {
		return violation("toolDone %q answers no toolGo", m.ID)
	}
	select {
	case s.tool.done <- m:
		return nil
	default:
		return violation("toolDone %q sent twice", m.ID)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(bytes.TrimSpace(t.b)) == 0 {
		return ""
	}
	return "; stderr: " + string(bytes.TrimSpace(t.b))
}
