package authoritylite

import (
	"log/slog"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// refusalLog logs every refused command at DEBUG and, per error code, at
// most one INFO line per refusalEvery with how many there were: a client
// retrying a refused command in a loop must not flood the log, and an
// operator still sees that something is being refused.
type refusalLog struct {
	mu    sync.Mutex
	codes map[protocol.Code]*refusalCount
}

type refusalCount struct {
	last time.Time
	n    int
}

const refusalEvery = 10 * time.Second

func (l *refusalLog) refused(log *slog.Logger, now time.Time, typ protocol.CommandType, err error) {
	code := protocol.CodeOf(err)
	log.Debug("command refused", "type", typ, "code", code, "err", err)
	l.mu.Lock()
	if l.codes == nil {
		l.codes = map[protocol.Code]*refusalCount{}
	}
	c := l.codes[code]
	if c == nil {
		c = &refusalCount{}
		l.codes[code] = c
	}
	c.n++
	if !c.last.IsZero() && now.Sub(c.last) < refusalEvery {
		l.mu.Unlock()
		return
	}
	n := c.n
	c.last, c.n = now, 0
	l.mu.Unlock()
	log.Info("commands refused", "code", code, "count", n, "lastType", typ, "lastErr", err)
}
