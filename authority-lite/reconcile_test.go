package authoritylite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// buffered builds w1's rebased offline lease_renew for wi-1 carrying the
// binding of lease (bufferedAt = disconnectedAt + after).
func (k *svc) buffered(w group.WorkItem, disconnected time.Time, after time.Duration, usage protocol.Usage) []byte {
	k.t.Helper()
	l := w.Lease
	b := protocol.OfflineBinding{AgentID: "w1", GroupID: "grp-a", WorkItemID: w.WorkItemID, OriginalSessionEpoch: l.SessionEpoch,
		OwnershipEpoch: l.OwnershipEpoch, HistoricalLeaseID: l.LeaseID, DisconnectedAt: protocol.NewTime(disconnected),
		BufferedAt: protocol.NewTime(disconnected.Add(after)), GraceDeadline: protocol.NewTime(l.ExpiresAt.Add(OfflineGrace)),
		HistoricalLeaseExpiresAt: l.ExpiresAt, UsageDelta: usage}
	data, err := json.Marshal(b)
	if err != nil {
		k.t.Fatal(err)
	}
	_, raw, err := k.w["w1"].Build(protocol.CmdLeaseRenew, "grp-a", &protocol.RenewLeasePayload{WorkItemID: w.WorkItemID, OwnershipEpoch: l.OwnershipEpoch, LeaseID: l.LeaseID, Progress: progress(disconnected)},
		func(e *protocol.Envelope) {
			e.Extensions = protocol.Extensions{protocol.OfflineExtensionURI: {Critical: true, Data: data}}
		})
	if err != nil {
		k.t.Fatal(err)
	}
	return raw
}

func (k *svc) submitRaw(raw []byte) (*protocol.Receipt, error) {
	return k.s.Submit(context.Background(), "", raw)
}

func TestReconcileWithinGraceChargesOnce(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	disc := k.clk.Now().Add(10 * time.Second)
	raw := k.buffered(w, disc, 20*time.Second, protocol.Usage{Tokens: 100, ToolCalls: 2})
	k.clk.Advance(40 * time.Second) // reconnect, lease still current
	r1, err := k.submitRaw(raw)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if len(r1.Events) != 2 {
		t.Fatalf("want usage + progress events, got %d", len(r1.Events))
	}
	// A resend after a lost receipt (second disconnect) charges nothing more.
	if _, err := k.submitRaw(raw); err != nil {
		t.Fatal(err)
	}
	if u := k.s.Usage("grp-a", "wi-1"); u.Tokens != 100 || u.ToolCalls != 2 {
		t.Fatalf("usage %+v, want charged once", u)
	}
	evs := checkLog(t, k.s, "grp-a")
	var usageEv group.UsageRecorded
	for _, ev := range evs {
		if ev.Type == protocol.EvtResourceUsageRecorded {
			if err := json.Unmarshal(ev.Payload, &usageEv); err != nil {
				t.Fatal(err)
			}
		}
	}
	if usageEv.HistoricalSessionEpoch == 0 || usageEv.ReconcilingSessionEpoch == 0 {
		t.Fatalf("usage event must name both sessions: %+v", usageEv)
	}
}

func TestReconcileRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(k *svc, w group.WorkItem) []byte
		code  protocol.Code
	}{
		{"after the grace window", func(k *svc, w group.WorkItem) []byte {
			disc := k.clk.Now().Add(10 * time.Second)
			// buffered 5 minutes later: lease (2 min) plus grace (2 min) is over
			raw := k.buffered(w, disc, 5*time.Minute, protocol.Usage{Tokens: 10})
			k.clk.Advance(6 * time.Minute)
			return raw
		}, protocol.CodeWorkLeaseExpired},
		{"owner changed while offline", func(k *svc, w group.WorkItem) []byte {
			disc := k.clk.Now().Add(10 * time.Second)
			raw := k.buffered(w, disc, 30*time.Second, protocol.Usage{Tokens: 10})
			k.clk.Advance(3 * time.Minute) // lease expired; coordinator re-offers to w2
			c := k.item("wi-1").Contract
			k.ok(k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: "wi-1", OfferID: "off-2", Contract: c,
				Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: "w2", SelectionBasis: basis(k.clk.Now())}}, ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Minute))})
			k.ok(k.w["w2"], protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: "wi-1", OfferID: "off-2", ContractRevision: 1, ScheduleDisclosure: disclosure(k.clk.Now())})
			return raw
		}, protocol.CodeWorkStaleOwnership},
		{"budget overflow", func(k *svc, w group.WorkItem) []byte {
			disc := k.clk.Now().Add(10 * time.Second)
			raw := k.buffered(w, disc, 20*time.Second, protocol.Usage{Tokens: 5000})
			k.clk.Advance(time.Minute)
			return raw
		}, protocol.CodeBudgetExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newSvc(t)
			w := k.toActive("wi-1")
			raw := k.rebuildForCurrentSession(tc.setup(k, w))
			last := k.s.LastSequence("grp-a")
			before := k.item("wi-1")
			_, err := k.submitRaw(raw)
			if protocol.CodeOf(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			after := k.item("wi-1")
			if k.s.LastSequence("grp-a") != last || after.Revision != before.Revision || !k.s.Usage("grp-a", "wi-1").IsZero() {
				t.Fatal("a refused reconciliation left a trace")
			}
		})
	}
}

// Progress buffered while the lease was valid and delivered after it
// expired, within the offline grace, is reconciled as a historical fact
// (spec 11.5): accepted, its usage charged once, the lapsed lease not
// renewed.
func TestReconcileAfterTheLeaseExpiredWithinGrace(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	disc := k.clk.Now().Add(10 * time.Second)
	raw := k.buffered(w, disc, 20*time.Second, protocol.Usage{Tokens: 9})
	k.clk.Advance(w.Lease.ExpiresAt.Sub(k.clk.Now()) + OfflineGrace/2) // past the lease, within the grace
	raw = k.rebuildForCurrentSession(raw)
	if _, err := k.submitRaw(raw); err != nil {
		t.Fatalf("progress buffered within its lease, delivered within the grace: %v", err)
	}
	if u := k.s.Usage("grp-a", "wi-1"); u.Tokens != 9 {
		t.Fatalf("usage %+v, want the buffered 9 tokens charged", u)
	}
	if got := k.item("wi-1"); got.Lease != nil && got.Lease.ExpiresAt.After(k.clk.Now()) {
		t.Fatalf("the lapsed lease was renewed to %s by historical progress", got.Lease.ExpiresAt)
	}
}

func TestReconcileAfterSessionReplacement(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			k := newSvc(t)
			w := k.toActive("wi-1")
			disc := k.clk.Now().Add(5 * time.Second)
			before := k.buffered(w, disc, 10*time.Second, protocol.Usage{Tokens: 7})
			k.clk.Advance(30 * time.Second)
			if restart {
				// The lease records are read back from the store: the open
				// lease must still be closed when the session revokes it.
				k.s.Close()
				k.s = openSvc(t, k.dir, k.clk, k.akey)
				k.w["w1"].s = k.s
			}
			// The worker restarts: a new session revokes the lease (closed now).
			if err := k.w["w1"].OpenSession(context.Background()); err != nil {
				t.Fatal(err)
			}
			late := k.buffered(w, disc, 40*time.Second, protocol.Usage{Tokens: 7}) // after the close
			before = k.rebuildForCurrentSession(before)
			if _, err := k.submitRaw(before); err != nil {
				t.Fatalf("progress buffered before the close: %v", err)
			}
			if got := k.item("wi-1"); got.State != protocol.WorkQueued {
				t.Fatalf("historical progress moved the item to %s", got.State)
			}
			if _, err := k.submitRaw(late); protocol.CodeOf(err) != protocol.CodeWorkLeaseExpired {
				t.Fatalf("progress buffered after the close: %v", err)
			}
			if u := k.s.Usage("grp-a", "wi-1"); u.Tokens != 7 {
				t.Fatalf("usage %+v", u)
			}
		})
	}
}

// rebuildForCurrentSession re-signs a buffered command under the agent's
// current session, keeping its binding and payload (what the worker's
// offline.Rebase does).
func (k *svc) rebuildForCurrentSession(raw []byte) []byte {
	k.t.Helper()
	var cmd protocol.Command
	if err := json.Unmarshal(raw, &cmd); err != nil {
		k.t.Fatal(err)
	}
	env := k.w["w1"].Envelope(cmd.Type, cmd.GroupID)
	cmd.SessionEpoch, cmd.MembershipEpoch, cmd.IssuedAt = env.SessionEpoch, env.MembershipEpoch, protocol.NewTime(k.clk.Now())
	out, err := protocol.SignedCommand(&cmd, k.w["w1"].Key)
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// bufferedPost builds w1's rebased offline message.post under w's lease.
func (k *svc) bufferedPost(w group.WorkItem, disconnected time.Time, p *protocol.PostMessagePayload) []byte {
	k.t.Helper()
	l := w.Lease
	b := protocol.OfflineBinding{AgentID: "w1", GroupID: "grp-a", WorkItemID: w.WorkItemID, OriginalSessionEpoch: l.SessionEpoch,
		OwnershipEpoch: l.OwnershipEpoch, HistoricalLeaseID: l.LeaseID, DisconnectedAt: protocol.NewTime(disconnected),
		BufferedAt: protocol.NewTime(disconnected.Add(5 * time.Second)), GraceDeadline: protocol.NewTime(l.ExpiresAt.Add(OfflineGrace)),
		HistoricalLeaseExpiresAt: l.ExpiresAt, UsageDelta: protocol.Usage{}}
	data, err := json.Marshal(b)
	if err != nil {
		k.t.Fatal(err)
	}
	_, raw, err := k.w["w1"].Build(protocol.CmdMessagePost, "grp-a", p, func(e *protocol.Envelope) {
		e.Extensions = protocol.Extensions{protocol.OfflineExtensionURI: {Critical: true, Data: data}}
	})
	if err != nil {
		k.t.Fatal(err)
	}
	return raw
}

// A message buffered offline is accepted in its WorkItem's conversation
// only (spec 11.5); one to any other conversation, or replying into one,
// is refused with nothing appended. The same holds after a restart, when
// the conversations of the messages replied to are read back from the log.
func TestReconcileMessageConversationBound(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			k := newSvc(t)
			w := k.toActive("wi-1")
			k.ok(k.coord, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "elsewhere", ConversationID: "general", Text: "hello all"})
			k.ok(k.coord, protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "q", ConversationID: "wi-1", Text: "status?"})
			if restart {
				// The Group's message index is rebuilt from the log, with
				// each message's conversation.
				k.s.Close()
				k.s = openSvc(t, k.dir, k.clk, k.akey)
				k.w["w1"].s = k.s
			}
			disc := k.clk.Now().Add(5 * time.Second)
			posts := []struct {
				p    protocol.PostMessagePayload
				code protocol.Code // "" accepts
			}{
				{protocol.PostMessagePayload{MessageID: "off-1", ConversationID: "general", Text: "offline chatter"}, protocol.CodeAuthForbidden},
				{protocol.PostMessagePayload{MessageID: "off-2", ConversationID: "wi-2", Text: "about another item"}, protocol.CodeAuthForbidden},
				{protocol.PostMessagePayload{MessageID: "off-3", ConversationID: "wi-1", Text: "re", ReplyTo: "elsewhere"}, protocol.CodeAuthForbidden},
				{protocol.PostMessagePayload{MessageID: "off-4", ConversationID: "wi-1", Text: "step 2 done", ReplyTo: "q"}, ""},
				{protocol.PostMessagePayload{MessageID: "off-5", ConversationID: "wi-1", Text: "still working"}, ""},
			}
			raws := make([][]byte, len(posts))
			for i := range posts {
				raws[i] = k.bufferedPost(w, disc, &posts[i].p)
			}
			k.clk.Advance(30 * time.Second) // reconnect within the lease
			for i, tc := range posts {
				last := k.s.LastSequence("grp-a")
				_, err := k.submitRaw(k.rebuildForCurrentSession(raws[i]))
				if (tc.code == "") != (err == nil) || (err != nil && protocol.CodeOf(err) != tc.code) {
					t.Fatalf("%s: got %v, want %q", tc.p.MessageID, err, tc.code)
				}
				if tc.code != "" && k.s.LastSequence("grp-a") != last {
					t.Fatalf("%s: a refused message appended events", tc.p.MessageID)
				}
			}
			var posted []string
			for _, ev := range checkLog(t, k.s, "grp-a") {
				if ev.Type == protocol.EvtMessagePosted {
					posted = append(posted, ev.Aggregate.ID)
				}
			}
			if want := []string{"elsewhere", "q", "off-4", "off-5"}; strings.Join(posted, ",") != strings.Join(want, ",") {
				t.Fatalf("posted %v, want %v", posted, want)
			}
		})
	}
}
