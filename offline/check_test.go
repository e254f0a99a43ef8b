package offline

import (
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

func TestCheckBuffered(t *testing.T) {
	t.Parallel()
	tm := func(d time.Duration) protocol.Time { return protocol.NewTime(at(d)) }
	closed := func(d time.Duration) *time.Time { c := at(d); return &c }
	const ok = protocol.Code("")
	for _, tc := range []struct {
		name string
		buf  time.Duration // bufferedAt; the binding is offline since t0
		b    func(b *protocol.OfflineBinding)
		h    func(h *LeaseHistory)
		now  time.Duration
		want protocol.Code
	}{
		{name: "under the live lease", buf: time.Minute, want: ok},
		{name: "inside the grace", buf: 3 * time.Minute, want: ok},
		{name: "last millisecond of the grace", buf: 2*time.Minute + DefaultGrace - time.Millisecond, want: ok},
		{name: "at the grace deadline", buf: 2*time.Minute + DefaultGrace, want: protocol.CodeWorkLeaseExpired},
		{name: "authority grace shorter than the worker's", buf: 2*time.Minute + 45*time.Second,
			h: func(h *LeaseHistory) { h.Grace = 30 * time.Second }, want: protocol.CodeWorkLeaseExpired},
		{name: "authority grants no grace", buf: 2*time.Minute + time.Second,
			h: func(h *LeaseHistory) { h.Grace = -1 }, want: protocol.CodeWorkLeaseExpired},
		{name: "the worker's own deadline is earlier", buf: 2*time.Minute + 40*time.Second,
			b: func(b *protocol.OfflineBinding) { b.GraceDeadline = tm(2*time.Minute + 30*time.Second) }, want: protocol.CodeWorkLeaseExpired},
		{name: "lost after the lease expired: no grace", buf: 3 * time.Minute,
			b: func(b *protocol.OfflineBinding) { b.DisconnectedAt = tm(2*time.Minute + 30*time.Second) }, want: protocol.CodeWorkLeaseExpired},
		{name: "buffered before the lease started", buf: -3 * time.Minute,
			b: func(b *protocol.OfflineBinding) { b.DisconnectedAt = tm(-4 * time.Minute) }, want: protocol.CodeWorkLeaseExpired},
		{name: "after the lease closed", buf: time.Minute,
			h: func(h *LeaseHistory) { h.ClosedAt = closed(time.Minute) }, want: protocol.CodeWorkLeaseExpired},
		{name: "before the lease closed", buf: time.Minute - time.Millisecond,
			h: func(h *LeaseHistory) { h.ClosedAt = closed(time.Minute) }, want: ok},
		{name: "a renewal whose receipt was lost extends the lease", buf: 3 * time.Minute,
			h: func(h *LeaseHistory) { h.ExpiresAt = at(5 * time.Minute) }, want: ok},
		{name: "reconciled long after the outage", buf: 3 * time.Minute, now: 48 * time.Hour, want: ok},
		{name: "owner changed", buf: time.Minute,
			h: func(h *LeaseHistory) { h.CurrentOwner = "worker-2" }, want: protocol.CodeWorkStaleOwnership},
		{name: "ownership epoch moved on under the same owner", buf: time.Minute,
			h: func(h *LeaseHistory) { h.CurrentOwnershipEpoch = 3 }, want: protocol.CodeWorkStaleOwnership},
		{name: "no owner any more", buf: time.Minute,
			h: func(h *LeaseHistory) { h.CurrentOwner, h.CurrentOwnershipEpoch = "", 0 }, want: protocol.CodeWorkStaleOwnership},
		{name: "someone else's lease", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.AgentID = "worker-2" }, want: protocol.CodeAuthForbidden},
		{name: "no lease id", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.HistoricalLeaseID = "" }, want: protocol.CodeInvalidCommand},
		{name: "buffered before the disconnect", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.DisconnectedAt = tm(90 * time.Second) }, want: protocol.CodeInvalidCommand},
		{name: "grace deadline before the lease expiry", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.GraceDeadline = tm(time.Minute + time.Second) }, want: protocol.CodeInvalidCommand},
		{name: "grace deadline beyond MaxGrace", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.GraceDeadline = tm(2*time.Minute + MaxGrace + time.Millisecond) }, want: protocol.CodeInvalidCommand},
		{name: "buffered in the future", buf: 3 * time.Minute, now: 30 * time.Second, want: protocol.CodeInvalidCommand},
		{name: "another lease", buf: time.Minute,
			h: func(h *LeaseHistory) { h.LeaseID = "lease-10" }, want: protocol.CodeInvalidCommand},
		{name: "another WorkItem", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.WorkItemID = "wi-8" }, want: protocol.CodeInvalidCommand},
		{name: "ownership epoch not the lease's", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.OwnershipEpoch = 1 }, want: protocol.CodeInvalidCommand},
		{name: "original session not the lease's", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) { b.OriginalSessionEpoch = 4 }, want: protocol.CodeInvalidCommand},
		{name: "claims an expiry never granted", buf: time.Minute,
			b: func(b *protocol.OfflineBinding) {
				b.HistoricalLeaseExpiresAt, b.GraceDeadline = tm(3*time.Minute), tm(3*time.Minute+DefaultGrace)
			}, want: protocol.CodeInvalidCommand},
	} {
		b := binding(tc.buf, protocol.Usage{Tokens: 10})
		if tc.b != nil {
			tc.b(&b)
		}
		h := historyOf(testLease())
		if tc.h != nil {
			tc.h(&h)
		}
		now := tc.now
		if now == 0 {
			now = time.Hour
		}
		err := CheckBuffered(b, h, at(now))
		switch {
		case tc.want == ok && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != ok && err == nil:
			t.Errorf("%s: accepted, want %s", tc.name, tc.want)
		case tc.want != ok && protocol.CodeOf(err) != tc.want:
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if pe, isPE := err.(*protocol.Error); err != nil && (!isPE || pe.Retryable) {
			t.Errorf("%s: %T %v is not a final *protocol.Error", tc.name, err, err)
		}
	}
}

func TestNonZeroDimensions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		u    protocol.Usage
		want []string
	}{
		{protocol.Usage{}, nil},
		{protocol.Usage{Money: 0.01}, []string{"money"}},
		{protocol.Usage{Tokens: 1, SideEffects: 2}, []string{"tokens", "sideEffects"}},
		{protocol.Usage{Money: 1, Tokens: 1, ToolCalls: 1, ComputeSeconds: 1, WallClockSeconds: 1, SideEffects: 1},
			[]string{"money", "tokens", "toolCalls", "computeSeconds", "wallClockSeconds", "sideEffects"}},
		{protocol.Usage{ComputeSeconds: 0.5, WallClockSeconds: 2}, []string{"computeSeconds", "wallClockSeconds"}},
	} {
		got := NonZeroDimensions(tc.u)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.u, got, tc.want)
		}
		if (len(got) == 0) != tc.u.IsZero() {
			t.Errorf("%+v: disagrees with Usage.IsZero", tc.u)
		}
	}
}

// A buffered message.post stays in its WorkItem's conversation (spec 11.5).
func TestCheckBufferedMessage(t *testing.T) {
	t.Parallel()
	b := protocol.OfflineBinding{AgentID: "w1", GroupID: "grp-a", WorkItemID: "wi-1"}
	for _, tc := range []struct {
		name  string
		p     protocol.PostMessagePayload
		reply string // the replied message's conversation
		ptr   string // "" accepts
	}{
		{"in the WorkItem's conversation", protocol.PostMessagePayload{MessageID: "m", ConversationID: "wi-1", Text: "x"}, "", ""},
		{"reply within it", protocol.PostMessagePayload{MessageID: "m", ConversationID: "wi-1", Text: "x", ReplyTo: "m0"}, "wi-1", ""},
		{"another WorkItem's conversation", protocol.PostMessagePayload{MessageID: "m", ConversationID: "wi-2", Text: "x"}, "", "/payload/conversationId"},
		{"an arbitrary conversation", protocol.PostMessagePayload{MessageID: "m", ConversationID: "general", Text: "x"}, "", "/payload/conversationId"},
		{"reply into another conversation", protocol.PostMessagePayload{MessageID: "m", ConversationID: "wi-1", Text: "x", ReplyTo: "m0"}, "general", "/payload/replyTo"},
		{"reply to an unknown message", protocol.PostMessagePayload{MessageID: "m", ConversationID: "wi-1", Text: "x", ReplyTo: "m9"}, "", "/payload/replyTo"},
	} {
		err := CheckBufferedMessage(b, &tc.p, tc.reply)
		if tc.ptr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		pe, ok := err.(*protocol.Error)
		if !ok || pe.Code != protocol.CodeAuthForbidden || pe.Pointer != tc.ptr || pe.Details["conversationId"] != "wi-1" {
			t.Errorf("%s: %v, want AUTH_FORBIDDEN at %s", tc.name, err, tc.ptr)
		}
	}
}
