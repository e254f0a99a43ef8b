package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/protocol"
)

// What a Mission's owner reads before approving it (`mission status` of a
// Mission awaiting approval): per stage in plan order, the handler's own
// evidence, its outputs by output name with a short preview, and the
// coordinator's review in one line; then the commands that decide.

// previewBytes bounds an output's preview.
const previewBytes = 72

// renderReview writes the review of v's stages; fetch reads an artifact's
// bytes (a failure shows in place of the preview).
func (v *missionView) renderReview(ctx context.Context, w io.Writer, s missionStatus, fetch func(context.Context, string) ([]byte, error)) {
	for _, st := range s.Stages {
		fmt.Fprintf(w, "\nstage %s: %s", st.WorkItemID, st.State)
		work := v.work[st.WorkItemID]
		if work == nil {
			fmt.Fprintln(w, ", nothing submitted")
			continue
		}
		fmt.Fprintln(w)
		for _, e := range work.evidence {
			fmt.Fprintf(w, "  evidence  [%s] %s", e.Result, safe(e.Subject))
			if e.Method != "" {
				fmt.Fprintf(w, ": %s", safe(e.Method))
			}
			if len(e.Criteria) > 0 {
				fmt.Fprintf(w, " (criteria %s)", safe(strings.Join(e.Criteria, ", ")))
			}
			fmt.Fprintln(w)
		}
		contract := v.g.Items[st.WorkItemID].Contract
		for _, d := range work.artifacts {
			m, ok := v.manifests[d]
			name := outputName(contract, m.MediaType)
			if !ok {
				fmt.Fprintf(w, "  output    %s: not published\n", shortHash(d))
				continue
			}
			fmt.Fprintf(w, "  output    %s (%s, %d bytes): %s\n", name, m.MediaType, m.Size, preview(ctx, fetch, d))
		}
		if len(work.review) > 0 {
			var steps []string
			for _, e := range work.review {
				steps = append(steps, strings.TrimPrefix(safe(e.Method), "coordinator review: ")+": "+string(e.Result))
			}
			fmt.Fprintf(w, "  review    %s\n", strings.Join(steps, "; "))
		}
	}
}

// decideLines are the commands that approve or send back missionID.
func decideLines(w io.Writer, missionID, ownerKey string) {
	key := ownerKey
	if key == "" {
		key = "KEY"
	}
	fmt.Fprintf(w, "\nto approve:          mwp-worker mission approve %s --owner-key %s [--comment TEXT]\n", missionID, key)
	fmt.Fprintf(w, "to request changes:  mwp-worker mission request-changes %s --owner-key %s --comment 'ONE CHANGE PER LINE'\n", missionID, key)
	fmt.Fprintln(w, "(with the same --authority, --authority-fingerprint and --authority-key)")
}

// outputName is the contract's name for an output of mediaType.
func outputName(c protocol.WorkContract, mediaType string) string {
	for _, o := range c.RequiredOutputs {
		if o.MediaType == mediaType {
			return o.Name
		}
	}
	return "(unnamed)"
}

// preview is an output's first bytes on one line, or why there are none.
func preview(ctx context.Context, fetch func(context.Context, string) ([]byte, error), digest string) string {
	b, err := fetch(ctx, digest)
	if err != nil {
		return "(not readable: " + oneLine(err.Error()) + ")"
	}
	if !utf8.Valid(b) {
		return "(binary)"
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	if len(text) > previewBytes {
		cut := previewBytes
		for !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return safe(text)
}

// safe replaces control characters, so that text from handlers cannot
// drive the reader's terminal.
func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func shortHash(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}
