package client

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
)

// Client is the worker's connection to its Group Authority: one WebSocket
// multiplexing every Group, reconnected with backoff (see doc.go).
type Client struct {
	cfg   Config
	url   *url.URL
	tls   *tls.Config
	ids   *ids
	log   *slog.Logger
	state atomic.Int32

	kick     chan struct{} // AddGroup -> Run goroutine
	handKick chan struct{} // Hand or a released Hold -> Run goroutine

	hookQueued func(actionID string) // tests: a Send reached the connected loop

	mu       sync.Mutex
	groups   map[string]bool // configured and added
	rejected map[string]bool
	replays  map[string]uint64 // Group -> position to replay after (Redeliver)
	// dropped holds the Groups DropGroup took out while a connection
	// still streams them: their events are ignored until the next
	// connection (which does not subscribe them) or a new SUBSCRIBE.
	dropped map[string]bool
	running bool
	handed  []*pendingCmd // handed, not yet taken by the Run goroutine
	holds   int           // Hold calls not yet released
}

// New checks cfg and returns a Client; Run starts it.
func New(cfg Config) (*Client, error) {
	u, err := checkURL(cfg.URL, cfg.AllowInsecureLoopback)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.AgentID == "":
		return nil, errors.New("client: Config.AgentID is required")
	case !protocol.ValidKeyID(cfg.Key.KeyID) || len(cfg.Key.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("client: Config.Key is not a valid Ed25519 signing key")
	case cfg.Store == nil:
		return nil, errors.New("client: Config.Store is required")
	case cfg.FetchSnapshot != nil && cfg.VerifySnapshot == nil && cfg.AuthorityKeys == nil:
		return nil, errors.New("client: restoring snapshots needs VerifySnapshot or AuthorityKeys")
	}
	tc, err := cfg.Trust.Config()
	if err != nil {
		return nil, err
	}
	defDur(&cfg.PingInterval, 15*time.Second)
	defDur(&cfg.PingTimeout, 10*time.Second)
	defDur(&cfg.HandshakeTimeout, 10*time.Second)
	defDur(&cfg.WriteTimeout, 10*time.Second)
	defDur(&cfg.GapTimeout, 2*time.Second)
	defDur(&cfg.RetryDelay, time.Second)
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 2 << 20
	}
	if cfg.DecodeWorkers <= 0 {
		cfg.DecodeWorkers = decodeWorkers(goruntime.GOMAXPROCS(0))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = defaultBackoff
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.VerifySnapshot == nil && cfg.AuthorityKeys != nil {
		keys := cfg.AuthorityKeys
		cfg.VerifySnapshot = func(doc map[string]any) error { return protocol.Verify(doc, keys) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Client{
		cfg: cfg, url: u, tls: tc, ids: newIDs(), log: cfg.Logger.With("component", "runtime.client"),
		kick: make(chan struct{}, 1), handKick: make(chan struct{}, 1),
		groups: map[string]bool{}, rejected: map[string]bool{}, replays: map[string]uint64{}, dropped: map[string]bool{},
	}
	for _, g := range cfg.Groups {
		c.groups[g] = true
	}
	return c, nil
}

func defDur(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// State returns the current connection state.
func (c *Client) State() State { return State(c.state.Load()) }

func (c *Client) setState(ch StateChange) {
	if ch.State != StateGroupRejected {
		c.state.Store(int32(ch.State))
	}
	if c.cfg.OnState != nil {
		c.cfg.OnState(ch)
	}
}

// AddGroup subscribes a Group (at once when connected, else on connect),
// from the store's durable cursor. It also clears an earlier rejection.
func (c *Client) AddGroup(groupID string) {
	c.mu.Lock()
	c.groups[groupID] = true
	delete(c.rejected, groupID)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// forgotten reports a Group the store forgot.
func (c *Client) forgotten(groupID string) bool {
	ts, ok := c.cfg.Store.(Tombstones)
	return ok && ts.Forgotten(groupID)
}

// DropGroup stops subscribing a Group the store forgot: it is left out of
// every later SUBSCRIBE. A stream already running on the connection runs
// until the next reconnect (the binding has no frame to end one); the store
// refuses its events.
func (c *Client) DropGroup(groupID string) {
	c.mu.Lock()
	delete(c.groups, groupID)
	delete(c.replays, groupID)
	c.dropped[groupID] = true
	c.mu.Unlock()
}

// isDropped reports a Group DropGroup took out since the connection
// subscribed it.
func (c *Client) isDropped(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped[groupID]
}

// undrop forgets a drop: g is subscribed again (a new SUBSCRIBE), or a
// new connection streams only what it subscribes (g == "": all).
func (c *Client) undrop(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g == "" {
		clear(c.dropped)
		return
	}
	delete(c.dropped, g)
}

// joined takes the Groups the authority says the agent is a member of
// (the HELLO answer, a GROUPS frame: docs/wire.md) and subscribes those it
// does not follow yet, so a worker learns a Group it was added to without
// a restart. A Group no longer listed keeps its stream (spec 17.2 checks
// membership at SUBSCRIBE only).
//
// A Group the store forgot (queue.Store.Forget) is never subscribed again;
// the tombstones of Groups no longer listed are dropped, so they stay
// bounded by the list.
func (c *Client) joined(groups []string) {
	if c.cfg.IgnoreListed {
		return
	}
	if ts, ok := c.cfg.Store.(Tombstones); ok && groups != nil {
		if err := ts.KeepTombstones(groups); err != nil {
			c.log.Warn("drop tombstones of Groups no longer listed", "err", err)
		}
	}
	for _, g := range groups {
		if c.forgotten(g) {
			continue
		}
		c.mu.Lock()
		known := c.groups[g] && !c.rejected[g]
		c.mu.Unlock()
		if known {
			continue
		}
		if !slices.Contains(c.cfg.Store.GroupIDs(), g) {
			c.log.Info("member of a new Group: subscribing", "group", g)
		}
		c.AddGroup(g)
	}
}

// Redeliver asks the authority to send a Group's events after `after`
// again, although the store already holds them: a SUBSCRIBE from an older
// position (the server restarts the Group's stream). The store drops what
// it already applied. Operators use it to re-check a store against the
// log; the PoC uses it to inject duplicate delivery for real.
func (c *Client) Redeliver(groupID string, after uint64) {
	c.mu.Lock()
	c.replays[groupID] = after
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// takeReplays returns and clears the pending Redeliver requests.
func (c *Client) takeReplays() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replays
	c.replays = map[string]uint64{}
	return r
}

// wantedGroups is every Group to subscribe: configured, added and known to
// the store, minus the rejected, the forgotten and the diverged ones;
// sorted. The store is asked outside c.mu.
func (c *Client) wantedGroups() []string {
	stored := c.cfg.Store.GroupIDs()
	c.mu.Lock()
	set := make(map[string]bool, len(c.groups))
	for g := range c.groups {
		set[g] = true
	}
	for _, g := range stored {
		set[g] = true
	}
	out := make([]string, 0, len(set))
	for g := range set {
		if !c.rejected[g] {
			out = append(out, g)
		}
	}
	c.mu.Unlock()
	out = slices.DeleteFunc(out, func(g string) bool { return c.forgotten(g) || c.diverged(g) })
	slices.Sort(out)
	return out
}

func (c *Client) reject(groupID string, err error) {
	c.mu.Lock()
	c.rejected[groupID] = true
	c.mu.Unlock()
	c.setState(StateChange{State: StateGroupRejected, GroupID: groupID, Err: err})
}

// Run connects and keeps the connection up until ctx ends (returns nil),
// the session is replaced (ErrSessionReplaced), the authority does not
// speak our protocol version (the UNSUPPORTED_VERSION *protocol.Error) or
// the store is closed. Only one Run may be active at a time.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("client: Run is already active")
	}
	c.running = true
	c.mu.Unlock()
	q := newCmdQueue()
	tr := c.transport()
	defer func() {
		c.mu.Lock()
		c.running = false
		for _, p := range c.handed {
			for _, w := range p.waiters {
				deliver(w, cmdResult{err: ErrNotRunning})
			}
		}
		c.handed = nil
		c.mu.Unlock()
		tr.CloseIdleConnections()
	}()

	attempt, prev := 0, time.Duration(0)
	var redials redialLog
	for {
		c.setState(StateChange{State: StateConnecting})
		start := c.cfg.Clock.Now()
		established, err := c.session(ctx, q, tr)
		switch {
		case ctx.Err() != nil:
			q.failAll(ErrNotRunning)
			c.setState(StateChange{State: StateStopped})
			return nil
		case errors.Is(err, ErrSessionReplaced):
			q.failAll(err)
			c.setState(StateChange{State: StateSessionReplaced, Err: err})
			return err
		case isFatal(err):
			if errors.Is(err, berrors.ErrDatabaseNotOpen) && !errors.Is(err, queue.ErrClosed) {
				// bbolt noticed the closed store before queue did.
				err = fmt.Errorf("%w (%v)", queue.ErrClosed, err)
			}
			q.failAll(err)
			c.setState(StateChange{State: StateStopped, Err: err})
			return err
		}
		// Only a connection that stayed up restarts the backoff: one that
		// an authority drops right after HELLO must not reconnect in a
		// tight loop.
		if established && c.cfg.Clock.Now().Sub(start) >= stableAfter {
			attempt, prev = 0, 0
		}
		redials.failed(c.log, established, err)
		c.setState(StateChange{State: StateDisconnected, Err: err})
		prev = c.cfg.Backoff.delay(attempt, prev, c.cfg.Rand())
		attempt++
		wait := prev
		var busy *busyError
		if errors.As(err, &busy) {
			// A full authority said when to come back: then, spread.
			wait = afterRefusal(busy.retryAfter, prev, c.cfg.Rand())
		}
		if !c.pause(ctx, q, wait) {
			q.failAll(ErrNotRunning)
			c.setState(StateChange{State: StateStopped})
			return nil
		}
	}
}

// stableAfter is how long a connection must last to reset the backoff.
const stableAfter = 10 * time.Second

// pause waits d between connections while still taking Commands into q;
// false when ctx ended.
func (c *Client) pause(ctx context.Context, q *cmdQueue, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-c.handKick:
			c.persistHanded(q)
		}
	}
}

// isFatal reports errors no reconnect can cure: a closed store (the
// outbox read reaches bbolt directly) or a protocol version mismatch.
func isFatal(err error) bool {
	return errors.Is(err, queue.ErrClosed) || errors.Is(err, berrors.ErrDatabaseNotOpen) ||
		protocol.CodeOf(err) == protocol.CodeUnsupportedVersion || errors.Is(err, ErrPinMismatch)
}

// transport is the HTTP client transport for dialing: HTTP/1.1 (the
// WebSocket upgrade), our TLS config, proxies from the environment.
func (c *Client) transport() *http.Transport {
	d := &net.Dialer{Timeout: c.cfg.HandshakeTimeout}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		TLSClientConfig:     c.tls.Clone(),
		TLSHandshakeTimeout: c.cfg.HandshakeTimeout,
		ForceAttemptHTTP2:   false,
	}
}

// redialLog keeps a client's log readable while its authority is down:
// one line when a connection ends (or when the first dial fails), then one
// at each doubling of the failed redials with their count, not a
// "disconnected" line per redial; every redial is at DEBUG.
type redialLog struct {
	failures  int  // failed dials since the last established connection
	announced bool // the outage has had its line
}

func (r *redialLog) failed(log *slog.Logger, established bool, err error) {
	if established {
		r.failures, r.announced = 0, true
		log.Info("disconnected from authority", "err", err)
		return
	}
	r.failures++
	switch n := r.failures; {
	case !r.announced:
		r.announced = true
		log.Info("could not connect to the authority; retrying with back-off", "err", err)
	case n >= 2 && n&(n-1) == 0:
		log.Info("authority still unreachable", "attempts", n, "err", err)
	default:
		log.Debug("authority still unreachable", "attempts", n, "err", err)
	}
}
