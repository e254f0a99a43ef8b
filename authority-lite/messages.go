package authoritylite

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"golang.org/x/time/rate"
)

// Messages are decided by package group (messages.go there).

// messages returns the Group's message index, rebuilding it from the log
// the first time (messages are rare next to work events).
func (s *Service) messages(gs *groupState) group.Messages {
	if gs.msgs != nil {
		return gs.msgs
	}
	gs.msgs = group.Messages{}
	_ = s.scanEvents(gs.id, 0, func(ev *protocol.Event, _ []byte) bool {
		if ev.Aggregate == nil || ev.Aggregate.Kind != protocol.AggregateMessage {
			return true
		}
		var conv string
		if ev.Type == protocol.EvtMessagePosted && gs.msgs[ev.Aggregate.ID] == nil {
			var p struct {
				ConversationID string `json:"conversationId"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			conv = p.ConversationID
		}
		gs.msgs.Fold(ev.Type, ev.Aggregate.ID, ev.Actor, ev.Rev(), conv)
		return true
	})
	return gs.msgs
}

// rateLimiter is a token bucket per actor (spec 20): Burst at once, then
// one every Every. The buckets are golang.org/x/time/rate limiters fed the
// authority's clock. Actors are authenticated principals, so the map is
// bounded by what the Organization registered.
type rateLimiter struct {
	mu     sync.Mutex
	Burst  int
	Every  time.Duration
	bucket map[protocol.Actor]*rate.Limiter
}

func (r *rateLimiter) allow(a protocol.Actor, now time.Time) error {
	if r == nil || r.Burst <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bucket == nil {
		r.bucket = map[protocol.Actor]*rate.Limiter{}
	}
	b := r.bucket[a]
	if b == nil {
		b = rate.NewLimiter(rate.Every(r.Every), r.Burst)
		r.bucket[a] = b
	}
	res := b.ReserveN(now, 1)
	wait := r.Every
	if res.OK() {
		if wait = res.DelayFrom(now); wait == 0 {
			return nil
		}
		res.CancelAt(now)
	}
	ms := max(1, (wait+time.Millisecond-1)/time.Millisecond)
	return protocol.WithDetails(protocol.Errorf(protocol.CodeRateLimited, "%s %s is over its rate of %d per %s", a.Kind, a.ID, r.Burst, time.Duration(r.Burst)*r.Every), "retryAfterMs", int64(ms))
}
