package client

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// An advisory Command answered RATE_LIMITED (or BACKPRESSURE) gets the
// error back, leaves the outbox and pauses nothing: the Group's next
// Command goes at once although the clock never reaches retryAfterMs. The
// same answer to a plain Send is retried after a pause of its Group
// (TestRateLimitedCommandIsResentUnchanged, TestBackpressurePausesOnlyItsGroup).
func TestSendAdvisoryIsNotRetriedNorPausesItsGroup(t *testing.T) {
	for _, code := range []protocol.Code{protocol.CodeRateLimited, protocol.CodeBackpressure} {
		t.Run(string(code), func(t *testing.T) {
			noLeaks(t)
			fs := newFakeServer(t, nil)
			fs.onCommand = func(sc *serverConn, frameID string, raw []byte) bool {
				if !bytes.Contains(raw, []byte(`"act-msg`)) {
					return false // default ACK
				}
				e := protocol.Errorf(code, "slow down")
				e.Details = map[string]any{"retryAfterMs": 3600000}
				sc.control(protocol.ErrorFrame{Type: protocol.FrameError, FrameID: "s-" + frameID, InReplyTo: frameID, Error: e})
				return true
			}
			clk := clock.NewFake(t0)
			fs.now = clk.Now
			store := openStore(t, t.TempDir())
			defer store.Close()
			r := startClient(t, fs, Config{Store: store, Clock: clk})
			r.connected(t)
			// Bounded: a retried advisory Command would wait an hour.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			_, err := r.c.SendAdvisory(ctx, signedCommand(t, "act-msg-1", "grp-a"))
			if protocol.CodeOf(err) != code {
				t.Fatalf("SendAdvisory = %v, want %s", err, code)
			}
			if rc, err := r.c.Send(ctx, signedCommand(t, "act-work", "grp-a")); err != nil || rc.ActionID != "act-work" {
				t.Fatalf("next Command of the Group = %+v, %v", rc, err)
			}
			if ids := outboxIDs(t, store); len(ids) != 0 {
				t.Fatalf("outbox %v", ids)
			}
			_, cmds, _, _ := fs.snapshot()
			if len(cmds) != 2 {
				t.Fatalf("server got %d commands, want the message once and the work command", len(cmds))
			}

			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
