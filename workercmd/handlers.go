package workercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/slots"
)

// demoCapability is what the built-in demo handler provides.
var demoCapability = protocol.Capability{ID: "demo.steps", Version: "1.0.0"}

// handlersFrom builds the external handlers after the embedder's own, or,
// with neither, the demo handler.
func handlersFrom(specs []string, own []slots.Handler, demo demoHandler, log *slog.Logger) ([]slots.Handler, error) {
	if len(specs) == 0 && len(own) == 0 {
		return []slots.Handler{demo}, nil
	}
	hs := append([]slots.Handler(nil), own...)
	for _, s := range specs {
		capSpec, command, ok := strings.Cut(s, "=")
		if !ok || capSpec == "" || command == "" {
			return nil, fmt.Errorf("%q: want CAP=PATH [ARG...]", s)
		}
		argv, err := splitCommand(command)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("%q: want CAP=PATH [ARG...]", s)
		}
		path := argv[0]
		id, version, hasVersion := strings.Cut(capSpec, "@")
		if !hasVersion {
			version = "1.0.0"
		}
		if !slots.VersionSatisfies(version, version) {
			return nil, fmt.Errorf("%q: version %q is not MAJOR.MINOR.PATCH", s, version)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, err
		}
		hs = append(hs, slots.Exec{Path: abs, Args: argv[1:], Cap: protocol.Capability{ID: id, Version: version}, Logger: log})
	}
	return hs, nil
}

// demoHandler is the built-in handler (see the run command's description).
type demoHandler struct {
	agentID string
	step    time.Duration
}

func (demoHandler) Capability() protocol.Capability { return demoCapability }

func (h demoHandler) Run(ctx context.Context, w *slots.Work) (slots.Result, error) {
	const steps = 3
	n := 0
	if st, ok := w.Resume(); ok {
		n, _ = strconv.Atoi(string(st))
	} else if _, err := w.Checkpoint(ctx, []byte("0"), checkpoint.Meta{Phase: "started"}); err != nil {
		// A first safe point, so a preemption before step 1 can yield.
		return slots.Result{}, err
	}
	c := w.Contract()
	for n < steps {
		select {
		case <-w.PreemptRequested():
			return slots.Result{}, slots.ErrPreempted
		case <-ctx.Done():
			return slots.Result{}, ctx.Err()
		case <-time.After(h.step):
		}
		n++
		phase := fmt.Sprintf("step %d of %d", n, steps)
		err := w.Progress(ctx, protocol.Progress{Phase: phase, MilestonesCompleted: protocol.List[string]{phase},
			NextCheckpoint: fmt.Sprintf("step %d", n+1), Blockers: protocol.List[string]{}, EvidenceRefs: protocol.List[string]{},
			RevisedEstimate: protocol.RevisedEstimate{CompletionAt: protocol.NewTime(time.Now().Add(time.Duration(steps-n) * h.step)), Confidence: 0.9}})
		if err != nil {
			return slots.Result{}, err
		}
		if _, err := w.Checkpoint(ctx, []byte(strconv.Itoa(n)), checkpoint.Meta{Phase: phase}); err != nil {
			return slots.Result{}, err
		}
	}
	d, err := w.PublishArtifact(ctx, "text/plain", []byte("demo result for "+w.Slot().WorkItemID+": "+c.Goal+"\n"))
	if err != nil {
		return slots.Result{}, err
	}
	var ev []protocol.Evidence
	for _, a := range c.AcceptanceCriteria {
		ev = append(ev, protocol.Evidence{Subject: w.Slot().WorkItemID, Criteria: protocol.List[string]{a.ID}, Method: "demo-handler",
			Result: protocol.EvidencePass, Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: h.agentID}, Timestamp: protocol.NewTime(time.Now()),
			Artifacts: protocol.List[string]{d}})
	}
	return slots.Result{Artifacts: []string{d}, Evidence: ev}, nil
}

// splitCommand splits a handler's command line into words, as a shell
// would without running one: blanks separate words; 'single quotes' keep
// everything; "double quotes" keep everything but \" and \\; a backslash
// outside quotes keeps the next character.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' at byte %d", i)
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a trailing backslash escapes nothing")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// splitList splits every value at any of seps and drops empty parts.
func splitList(values []string, seps string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
