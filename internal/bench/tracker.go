package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The moments of an item, as the driver sees them in the log.
const (
	phaseOffered = iota
	phaseAccepted
	phaseStarted
	phaseSubmitted
	phaseVerified
	phases
)

var phaseEvents = map[protocol.EventType]int{
	protocol.EvtWorkOfferCreated:   phaseOffered,
	protocol.EvtWorkOfferAccepted:  phaseAccepted,
	protocol.EvtWorkStarted:        phaseStarted,
	protocol.EvtWorkSubmitted:      phaseSubmitted,
	protocol.EvtWorkResultAccepted: phaseVerified,
}

// track is one item's times; reached[p] closes when phase p is seen.
type track struct {
	begin   time.Time // before work.authorize was sent
	at      [phases]time.Time
	reached [phases]chan struct{}
	failed  chan struct{}
	why     string
}

// await waits for phase p, a failure event of the item, or ctx.
func (t *track) await(ctx context.Context, p int) error {
	select {
	case <-t.reached[p]:
		return nil
	case <-t.failed:
		return fmt.Errorf("the log records %s", t.why)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("not %s within the item timeout", phaseName(p))
		}
		return fmt.Errorf("stopped before %s: %w", phaseName(p), ctx.Err())
	}
}

func phaseName(p int) string {
	return [...]string{"offered", "accepted", "started", "submitted", "verified"}[p]
}

// tracker holds every item's track and the run's first error.
type tracker struct {
	mu         sync.Mutex
	items      map[string]*track
	order      []*track
	events     int            // WorkItem events seen
	eventBytes int            // their signed bytes
	byType     map[string]int // WorkItem events by type
	first      error
	// forgets: a soak's tracker keeps no order and forgets each item
	// once driven, so that the driver does not grow with the items.
	forgets bool
}

func newTracker(n int) *tracker {
	return &tracker{items: make(map[string]*track, n), byType: map[string]int{}}
}

func newSoakTracker() *tracker {
	return &tracker{items: map[string]*track{}, byType: map[string]int{}, forgets: true}
}

// forget drops item id, once driven (a soak's tracker only).
func (tr *tracker) forget(id string) {
	tr.mu.Lock()
	if tr.forgets {
		delete(tr.items, id)
	}
	tr.mu.Unlock()
}

func (tr *tracker) add(id string) *track {
	t := &track{failed: make(chan struct{})}
	for p := range t.reached {
		t.reached[p] = make(chan struct{})
	}
	tr.mu.Lock()
	tr.items[id] = t
	if !tr.forgets {
		tr.order = append(tr.order, t)
	}
	tr.mu.Unlock()
	return t
}

// note records event typ of item id seen at now.
func (tr *tracker) note(id string, typ protocol.EventType, now time.Time, size int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.items[id]
	if t == nil {
		return
	}
	tr.events++
	tr.eventBytes += size
	tr.byType[string(typ)]++
	if p, ok := phaseEvents[typ]; ok {
		if t.at[p].IsZero() {
			t.at[p] = now
			close(t.reached[p])
		}
		return
	}
	if typ == protocol.EvtWorkFailed || typ == protocol.EvtWorkCancelled {
		select {
		case <-t.failed:
		default:
			t.why = string(typ)
			close(t.failed)
		}
	}
}

func (tr *tracker) fail(err error) {
	tr.mu.Lock()
	if tr.first == nil {
		tr.first = err
	}
	tr.mu.Unlock()
}

func (tr *tracker) err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.first
}

func (tr *tracker) verified() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, t := range tr.order {
		if !t.at[phaseVerified].IsZero() {
			n++
		}
	}
	return n
}
