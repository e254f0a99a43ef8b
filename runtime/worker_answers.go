package runtime

import (
	"time"

	lc "github.com/missionweave/mwp-worker/runtime/item"
)

// The engine's side of answers: package item decides what an answer
// calls for (worker_effects.go carries it out); a command's back-off is
// kept here with its signed bytes.

// due reports whether a command's back-off has passed: also when its end
// lies further ahead than any back-off, after the clock stepped back.
func (c *itemCmd) due(now time.Time) bool {
	return !now.Before(c.retryAt) || c.retryAt.Sub(now) > maxRetryBackoff
}

// retryDue pumps the items whose command back-off has passed.
func (e *engine) retryDue(now time.Time) {
	for _, it := range e.items {
		if len(it.cmds) > 0 && !it.Sending && !it.cmds[0].retryAt.IsZero() && it.cmds[0].due(now) {
			e.pump(it)
		}
	}
}

// The decisions on a refused work.submit, as Status records them.
const (
	SubmitFailed    = lc.SubmitFailed    // work.fail sent with the refusal as its reason
	SubmitLeaseLost = lc.SubmitLeaseLost // fenced, or the lease ended: nothing more is sent
	SubmitMovedOn   = lc.SubmitMovedOn   // the item left active: nothing to release
)

// answered reports whether err is the authority's answer (a protocol
// error), not a send that ended without one.
func answered(err error) bool { return lc.IsAnswer(err) }

// detail is one member of a protocol error's details, as a string.
func detail(err error, key string) string { return lc.Detail(err, key) }

// refusalText is err's text with the pointer of a refusal received over
// the wire.
func refusalText(err error) string { return lc.RefusalText(err) }
