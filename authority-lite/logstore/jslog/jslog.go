// Package jslog is the replicated logstore.Store: one NATS JetStream
// stream, replicated by the NATS servers' Raft groups, every write
// synced before its ack when the servers run with sync_interval: always.
//
// Every piece of the log is the last message, or the messages, of a
// subject of that one stream:
//
//	mwp.group.<group>     the Group's events in order; header Mwp-Seq is
//	                      the event's Group sequence (the count of the
//	                      Group's events, also inside the signed event)
//	mwp.first.<group>     the Group's lowest online sequence, once trimmed
//	mwp.receipt.<key>     a command's receipt
//	mwp.rec.<table>.<key> an Organization record; revision = stream sequence
//
// <group> and <key> are the id itself when it is made of letters, digits,
// '-' and '_', else '=' and its unpadded base64url.
//
// A command is one atomic batch (nats-server 2.12+, stream option
// allow_atomic): its receipts, each expecting its subject empty, then its
// events, the first expecting the stream sequence of the Group's last
// event (Nats-Expected-Last-Subject-Sequence). The server applies all of
// it or none, and refuses it when another decider appended to the Group,
// or stored the same receipt, first. A command of one event and no
// receipt is one ordinary publish with the same expectation. A server
// takes at most 1,000 messages in a batch (its default), which bounds a
// command's events and receipts together.
//
// Organization records live in the same stream rather than in key-value
// buckets (which are streams of their own): a read then goes to the
// stream's leader, where a bucket's direct get may be answered by a
// replica that has not applied the last write yet; and a later command
// may write a record and events in one batch. A deleted record is a
// message with header Mwp-Op: del, so a delete is a compare-and-set too.
//
// Reads go to the leader one message at a time (next message of a subject
// at or after a stream sequence), found by a binary search on the stream
// sequence: exact, and cheap for the reads the authority serves from its
// tail, slow for a whole long Group (a consumer would stream it; not yet).
package jslog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

// Config says where the stream is and how it is kept.
type Config struct {
	// URLs are the NATS servers, comma-separated (nats://host:port,...).
	URLs string
	// Stream is the stream's name; default "MWP".
	Stream string
	// Subjects is the first token of its subjects; default "mwp". Two
	// logs on one NATS system need two streams and two of these.
	Subjects string
	// Replicas is how many servers keep the stream; default 3.
	Replicas int
	// Options are nats.go's connection options (TLS, credentials, name).
	Options []nats.Option
	// Timeout bounds each request to the servers; default 5 s.
	Timeout time.Duration
}

// Store is a logstore.Store on a JetStream stream.
type Store struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	prefix  string
	timeout time.Duration

	mu sync.Mutex
	// tails caches each Group's last event: the expectation the next
	// append sends. A stale entry only costs a refused append.
	tails map[string]tail
}

type tail struct{ seq, streamSeq uint64 }

var _ logstore.Store = (*Store)(nil)

const (
	hdrSeq = "Mwp-Seq"
	hdrOp  = "Mwp-Op"
	// The server's codes for a refused expectation: 10071 on one replica,
	// 10164 on a replicated stream.
	errWrongLast, errWrongLastR = 10071, 10164
	// "no suitable peers for placement".
	errNoPeers = 10005
)

// fill gives the unset fields their defaults.
func (cfg *Config) fill() {
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
}

// connect fills cfg's defaults (stream and subject prefix when unset) and
// connects to its servers.
func (cfg *Config) connect(stream, subjects string) (*nats.Conn, jetstream.JetStream, error) {
	if cfg.Stream == "" {
		cfg.Stream = stream
	}
	if cfg.Subjects == "" {
		cfg.Subjects = subjects
	}
	cfg.fill()
	nc, err := nats.Connect(cfg.URLs, cfg.Options...)
	if err != nil {
		return nil, nil, fmt.Errorf("jslog: connect %s: %w", cfg.URLs, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// Open connects, then creates the stream or brings its configuration to
// cfg's (replicas, atomic batches).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	nc, js, err := cfg.connect("MWP", "mwp")
	if err != nil {
		return nil, err
	}
	// A cluster that has just formed, or a loaded one, may take several
	// request timeouts before it places a replicated stream.
	ctx, cancel := context.WithTimeout(ctx, 12*cfg.Timeout)
	defer cancel()
	p := cfg.Subjects
	sc := jetstream.StreamConfig{
		Name:               cfg.Stream,
		Description:        "mwp-worker authority log",
		Subjects:           []string{p + ".group.*", p + ".first.*", p + ".receipt.*", p + ".rec.*.*"},
		Storage:            jetstream.FileStorage,
		Replicas:           cfg.Replicas,
		Retention:          jetstream.LimitsPolicy,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		Discard:            jetstream.DiscardNew,
		AllowAtomicPublish: true,
		DenyDelete:         true,
	}
	stream, err := createStream(ctx, js, sc, cfg.Timeout)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jslog: stream %s: %w", cfg.Stream, err)
	}
	return &Store{nc: nc, js: js, stream: stream, prefix: p, timeout: cfg.Timeout, tails: map[string]tail{}}, nil
}

// createStream creates or updates the stream, again while the cluster
// cannot place it yet (a meta leader just elected has not heard from its
// peers and calls them offline for a moment) or a request went unanswered
// within its own timeout (lost in a leader change): creating is idempotent.
func createStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig, each time.Duration) (jetstream.Stream, error) {
	for {
		try, cancel := context.WithTimeout(ctx, each)
		stream, err := js.CreateOrUpdateStream(try, sc)
		cancel()
		if err == nil || !retryCreate(err) {
			return stream, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// retryCreate reports whether a failed stream creation may succeed later.
func retryCreate(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode == errNoPeers
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout)
}

// token is an id as one subject token.
func token(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
		}
	}
	if id == "" {
		return "="
	}
	return id
}

func untoken(t string) (string, error) {
	if enc, ok := strings.CutPrefix(t, "="); ok {
		b, err := base64.RawURLEncoding.DecodeString(enc)
		return string(b), err
	}
	return t, nil
}

func (s *Store) groupSubject(id string) string  { return s.prefix + ".group." + token(id) }
func (s *Store) firstSubject(id string) string  { return s.prefix + ".first." + token(id) }
func (s *Store) receiptSubject(k string) string { return s.prefix + ".receipt." + token(k) }
func (s *Store) recordSubject(t logstore.Table, k string) string {
	return s.prefix + ".rec." + string(t) + "." + token(k)
}

func (s *Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

func (s *Store) err(err error) error {
	if err != nil && s.nc.IsClosed() {
		return fmt.Errorf("%w: %v", logstore.ErrClosed, err)
	}
	return err
}

// msg is one event or record as read back.
type msg struct {
	seq, streamSeq uint64
	data           []byte
	del            bool
}

func toMsg(m *jetstream.RawStreamMsg) (msg, error) {
	out := msg{streamSeq: m.Sequence, data: m.Data, del: m.Header.Get(hdrOp) == "del"}
	if v := m.Header.Get(hdrSeq); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return out, fmt.Errorf("jslog: %s message %d: bad %s %q", m.Subject, m.Sequence, hdrSeq, v)
		}
		out.seq = n
	}
	return out, nil
}

// last is the last message of a subject (found false when none).
func (s *Store) last(ctx context.Context, subject string) (msg, bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return msg{}, false, nil
	}
	if err != nil {
		return msg{}, false, s.err(err)
	}
	out, err := toMsg(m)
	return out, true, err
}

// next is a subject's first message at or after a stream sequence.
func (s *Store) next(ctx context.Context, subject string, from uint64) (msg, bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	m, err := s.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return msg{}, false, nil
	}
	if err != nil {
		return msg{}, false, s.err(err)
	}
	out, err := toMsg(m)
	return out, true, err
}

func (s *Store) first(ctx context.Context, groupID string) (uint64, error) {
	m, ok, err := s.last(ctx, s.firstSubject(groupID))
	if err != nil || !ok {
		return 1, err
	}
	return strconv.ParseUint(string(m.data), 10, 64)
}

// groupTail reads a Group's last event and remembers it.
func (s *Store) groupTail(ctx context.Context, groupID string) (tail, error) {
	m, ok, err := s.last(ctx, s.groupSubject(groupID))
	if err != nil || !ok {
		return tail{}, err
	}
	t := tail{m.seq, m.streamSeq}
	s.remember(groupID, t)
	return t, nil
}

// remember keeps t unless a later tail is known already.
func (s *Store) remember(groupID string, t tail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.seq >= s.tails[groupID].seq {
		s.tails[groupID] = t
	}
}

func (s *Store) forget(groupID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tails, groupID)
}

func (s *Store) Bounds(ctx context.Context, groupID string) (first, last uint64, err error) {
	if first, err = s.first(ctx, groupID); err != nil {
		return 0, 0, err
	}
	t, err := s.groupTail(ctx, groupID)
	if err != nil {
		return 0, 0, err
	}
	if t.seq == 0 {
		return first, first - 1, nil
	}
	return first, t.seq, nil
}

// pubAck is the server's answer to a publish or a batch's commit.
type pubAck struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Count  uint64 `json:"count"`
}

// errExpectation is a publish refused because a subject was not where it
// was expected to be.
var errExpectation = errors.New("jslog: wrong last sequence")

// publish sends msgs, as one atomic batch when more than one, and again
// while no server answers for the stream (its leader moving): nothing was
// stored then, as no server took the commit.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	for {
		seq, err := s.publishOnce(ctx, msgs)
		if !errors.Is(err, nats.ErrNoResponders) {
			return seq, err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, err
		case <-t.C:
		}
	}
}

func (s *Store) publishOnce(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	last := msgs[len(msgs)-1]
	if len(msgs) > 1 {
		id := nats.NewInbox()[len(nats.InboxPrefix):]
		for i, m := range msgs {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		}
		last.Header.Set("Nats-Batch-Commit", "1")
		for _, m := range msgs[:len(msgs)-1] {
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, s.err(err)
			}
		}
	}
	resp, err := s.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return 0, s.err(err)
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("jslog: publish answer %q: %w", resp.Data, err)
	}
	if e := ack.Error; e != nil {
		if e.ErrCode == errWrongLast || e.ErrCode == errWrongLastR {
			return 0, fmt.Errorf("%w: %s", errExpectation, e.Description)
		}
		return 0, fmt.Errorf("jslog: publish refused: %s (%d)", e.Description, e.ErrCode)
	}
	return ack.Seq, nil
}

func expect(m *nats.Msg, streamSeq uint64) {
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(streamSeq, 10))
}

func (s *Store) Append(ctx context.Context, c logstore.Commit) error {
	if len(c.Events) == 0 {
		return errors.New("jslog: a commit without events")
	}
	s.mu.Lock()
	t, ok := s.tails[c.GroupID]
	s.mu.Unlock()
	if !ok || t.seq != c.After {
		var err error
		if t, err = s.groupTail(ctx, c.GroupID); err != nil {
			return err
		}
		if t.seq != c.After {
			return &logstore.ConflictError{GroupID: c.GroupID, Last: t.seq}
		}
	}
	msgs := make([]*nats.Msg, 0, len(c.Receipts)+len(c.Events))
	for _, r := range c.Receipts {
		m := nats.NewMsg(s.receiptSubject(r.Key))
		m.Data = r.Value
		expect(m, 0)
		msgs = append(msgs, m)
	}
	subject := s.groupSubject(c.GroupID)
	for i, raw := range c.Events {
		m := nats.NewMsg(subject)
		m.Data = raw
		m.Header.Set(hdrSeq, strconv.FormatUint(c.After+1+uint64(i), 10))
		if i == 0 {
			expect(m, t.streamSeq)
		}
		msgs = append(msgs, m)
	}
	seq, err := s.publish(ctx, msgs)
	if errors.Is(err, errExpectation) {
		s.forget(c.GroupID)
		for _, r := range c.Receipts {
			if _, ok, rerr := s.last(ctx, s.receiptSubject(r.Key)); rerr == nil && ok {
				return fmt.Errorf("receipt %q: %w", r.Key, logstore.ErrReceiptExists)
			}
		}
		last, _ := s.groupTail(ctx, c.GroupID)
		return &logstore.ConflictError{GroupID: c.GroupID, Last: last.seq}
	}
	if err != nil {
		s.forget(c.GroupID)
		return err
	}
	// The batch's messages are consecutive in the stream and the events
	// come last.
	s.remember(c.GroupID, tail{c.After + uint64(len(c.Events)), seq})
	return nil
}

// find returns the stream sequence of the Group's first event after a
// sequence (found false when there is none), by a binary search on the
// stream sequence: the Group's sequences rise with it.
func (s *Store) find(ctx context.Context, groupID string, after uint64) (uint64, bool, error) {
	subject := s.groupSubject(groupID)
	top, ok, err := s.last(ctx, subject)
	if err != nil || !ok || top.seq <= after {
		return 0, false, err
	}
	lo, hi := uint64(1), top.streamSeq
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, ok, err := s.next(ctx, subject, mid)
		if err != nil {
			return 0, false, err
		}
		if !ok || m.seq > after {
			hi = mid
		} else {
			lo = m.streamSeq + 1
		}
	}
	return lo, true, nil
}

func (s *Store) Read(ctx context.Context, groupID string, after uint64, max int, fn func(uint64, []byte) bool) error {
	first, err := s.first(ctx, groupID)
	if err != nil {
		return err
	}
	if after+1 < first {
		return fmt.Errorf("group %s keeps events from %d, read after %d: %w", groupID, first, after, logstore.ErrTrimmed)
	}
	from, ok, err := s.find(ctx, groupID, after)
	if err != nil || !ok {
		return err
	}
	subject := s.groupSubject(groupID)
	for n := 0; max <= 0 || n < max; n++ {
		m, ok, err := s.next(ctx, subject, from)
		if err != nil || !ok {
			return err
		}
		if m.seq != after+1+uint64(n) {
			return fmt.Errorf("jslog: group %s: event %d where %d was due", groupID, m.seq, after+1+uint64(n))
		}
		if !fn(m.seq, m.data) {
			return nil
		}
		from = m.streamSeq + 1
	}
	return nil
}

// Trim records the new first sequence, then purges the events below it,
// always keeping the Group's last event: it holds the Group's sequence.
// A crash between the two leaves old events stored, never served.
func (s *Store) Trim(ctx context.Context, groupID string, first uint64) error {
	old, last, err := s.Bounds(ctx, groupID)
	if err != nil {
		return err
	}
	if first > last+1 {
		return fmt.Errorf("jslog: trim group %s to %d past its last sequence %d", groupID, first, last)
	}
	if first <= old || last == 0 {
		return nil
	}
	m := nats.NewMsg(s.firstSubject(groupID))
	m.Data = strconv.AppendUint(nil, first, 10)
	seq, err := s.publish(ctx, []*nats.Msg{m})
	if err != nil {
		return err
	}
	pctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.stream.Purge(pctx, jetstream.WithPurgeSubject(s.firstSubject(groupID)), jetstream.WithPurgeSequence(seq)); err != nil {
		return s.err(err)
	}
	keep, ok, err := s.find(ctx, groupID, min(first, last)-1)
	if err != nil || !ok {
		return err
	}
	return s.err(s.stream.Purge(pctx, jetstream.WithPurgeSubject(s.groupSubject(groupID)), jetstream.WithPurgeSequence(keep)))
}

// subjects lists the ids under a subject prefix, in id order.
func (s *Store) subjects(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, s.err(err)
	}
	var out []string
	for subj := range info.State.Subjects {
		id, err := untoken(strings.TrimPrefix(subj, prefix))
		if err != nil {
			return nil, fmt.Errorf("jslog: subject %s: %w", subj, err)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

func (s *Store) Groups(ctx context.Context) ([]string, error) {
	return s.subjects(ctx, s.prefix+".group.")
}

func (s *Store) Receipt(ctx context.Context, key string) ([]byte, error) {
	m, ok, err := s.last(ctx, s.receiptSubject(key))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, logstore.ErrNotFound
	}
	return m.data, nil
}

func validTable(t logstore.Table) error {
	if !slices.Contains(logstore.Tables, t) {
		return fmt.Errorf("jslog: no table %q", t)
	}
	return nil
}

func (s *Store) Get(ctx context.Context, t logstore.Table, key string) ([]byte, uint64, error) {
	if err := validTable(t); err != nil {
		return nil, 0, err
	}
	m, ok, err := s.last(ctx, s.recordSubject(t, key))
	if err != nil {
		return nil, 0, err
	}
	if !ok || m.del {
		return nil, 0, logstore.ErrNotFound
	}
	return m.data, m.streamSeq, nil
}

// write publishes a record's new value or tombstone if its revision is
// still rev. A revision of 0 (must not exist) expects the subject empty
// or its tombstone.
func (s *Store) write(ctx context.Context, t logstore.Table, key string, m *nats.Msg, rev uint64) (uint64, error) {
	if err := validTable(t); err != nil {
		return 0, err
	}
	want := rev
	if rev == 0 {
		cur, ok, err := s.last(ctx, m.Subject)
		if err != nil {
			return 0, err
		}
		if ok && !cur.del {
			return 0, fmt.Errorf("record %q: %w", key, logstore.ErrConflict)
		}
		want = cur.streamSeq
	}
	expect(m, want)
	seq, err := s.publish(ctx, []*nats.Msg{m})
	if errors.Is(err, errExpectation) {
		return 0, fmt.Errorf("record %q: %w", key, logstore.ErrConflict)
	}
	return seq, err
}

func (s *Store) Put(ctx context.Context, t logstore.Table, key string, val []byte, rev uint64) (uint64, error) {
	m := nats.NewMsg(s.recordSubject(t, key))
	m.Data = val
	return s.write(ctx, t, key, m, rev)
}

func (s *Store) Delete(ctx context.Context, t logstore.Table, key string, rev uint64) error {
	if rev == 0 {
		return fmt.Errorf("record %q: %w", key, logstore.ErrConflict)
	}
	m := nats.NewMsg(s.recordSubject(t, key))
	m.Header.Set(hdrOp, "del")
	_, err := s.write(ctx, t, key, m, rev)
	return err
}

func (s *Store) Records(ctx context.Context, t logstore.Table, fn func(string, []byte) error) error {
	if err := validTable(t); err != nil {
		return err
	}
	keys, err := s.subjects(ctx, s.prefix+".rec."+string(t)+".")
	if err != nil {
		return err
	}
	for _, k := range keys {
		m, ok, err := s.last(ctx, s.recordSubject(t, k))
		if err != nil {
			return err
		}
		if !ok || m.del {
			continue
		}
		if err := fn(k, m.data); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the connection; a write still waiting for its answer
// returns an error (its outcome unknown: its receipt tells).
func (s *Store) Close() error {
	if s.nc.IsClosed() {
		return nil
	}
	s.nc.Close()
	return nil
}
