package jslog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/memtree"
)

// Tree is the authority's whole log (logstore.Tree, the layout of
// authority.db) in one JetStream stream that keeps the last message of
// each subject, one subject per key:
//
//	<p>.k.<bucket>…<bucket>.<key>  a key's value (header Mwp-Op: del: deleted)
//	<p>.b.<bucket>…<bucket>        a bucket, created at that stream sequence
//	<p>.s.<bucket>…<bucket>        a bucket's NextSequence
//
// each name a token as the Store's ids are. The tree is held in memory
// (memtree): Open reads the stream once, Views read memory (waiting while
// an Update is being written: unlike bbolt's, they never see the state
// before it), and an
// Update's changes, the last of each subject in the order they were last
// made, are one atomic batch whose first message expects the stream's last
// sequence to be the one this process wrote or read last. So exactly one
// process writes: another one's write refuses every later Update here
// (the Service then stops, as after any failed write, and a restart
// reads the stream again). A key is valid only after its bucket's
// creation: a bucket deleted and its keys purged after the batch leave,
// should the purge not happen, keys older than the bucket's marker,
// which Open skips.
//
// A server takes at most maxBatch messages in one atomic batch; an Update
// with more changes is written as several batches, in order, each ending
// where one of its writes marked with logstore.Cutter ends (a group commit
// cuts after each command), so a crash between them keeps every command
// whole; one write larger than a batch (a checkpoint of a very large
// Group, a retention trim of more events) is atomic only within each. Deleted keys leave their tombstone in the stream
// until their bucket is deleted.
type Tree struct {
	s    *Store
	mem  *memtree.Tree
	last uint64 // the stream's last sequence as this process wrote or read it
}

var _ logstore.Tree = (*Tree)(nil)

// maxBatch is the server's default limit of messages in an atomic batch.
const maxBatch = 1000

// OpenTree connects, creates the stream or brings its configuration to
// cfg's (default stream MWPLOG, subjects mwplog.>) and reads the log.
func OpenTree(ctx context.Context, cfg Config) (*Tree, error) {
	nc, js, err := cfg.connect("MWPLOG", "mwplog")
	if err != nil {
		return nil, err
	}
	p := cfg.Subjects
	sc := jetstream.StreamConfig{
		Name:               cfg.Stream,
		Description:        "mwp-worker authority log (one subject per key)",
		Subjects:           []string{p + ".k.>", p + ".b.>", p + ".s.>"},
		Storage:            jetstream.FileStorage,
		Replicas:           cfg.Replicas,
		Retention:          jetstream.LimitsPolicy,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  1,
		Discard:            jetstream.DiscardOld,
		AllowAtomicPublish: true,
		DenyDelete:         true,
	}
	cctx, cancel := context.WithTimeout(ctx, 12*cfg.Timeout)
	stream, err := createStream(cctx, js, sc, cfg.Timeout)
	cancel()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jslog: stream %s: %w", cfg.Stream, err)
	}
	t := &Tree{s: &Store{nc: nc, js: js, stream: stream, prefix: p, timeout: cfg.Timeout, tails: map[string]tail{}}, mem: memtree.New()}
	if err := t.load(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jslog: read stream %s: %w", cfg.Stream, err)
	}
	return t, nil
}

func (t *Tree) View(fn func(logstore.Tx) error) error { return t.mem.View(fn) }

func (t *Tree) Update(fn func(logstore.Tx) error) error {
	if t.s.nc.IsClosed() {
		return logstore.ErrClosed
	}
	return t.mem.UpdateThen(fn, t.persist)
}

// Close closes the connection; the tree in memory is dropped.
func (t *Tree) Close() error {
	t.mem.Close()
	return t.s.Close()
}

// path is a bucket path as subject tokens.
func pathTokens(path [][]byte) string {
	var b strings.Builder
	for i, name := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(token(string(name)))
	}
	return b.String()
}

func (t *Tree) subject(op memtree.Op) string {
	p := t.s.prefix
	switch op.Kind {
	case memtree.OpPut, memtree.OpDelete:
		return p + ".k." + pathTokens(op.Path) + "." + token(string(op.Key))
	case memtree.OpSequence:
		return p + ".s." + pathTokens(op.Path)
	}
	return p + ".b." + pathTokens(op.Path)
}

// persist writes an Update's changes in atomic batches of at most
// maxBatch messages, each ending where one of the Update's writes ends
// (cuts) unless one write alone is larger.
func (t *Tree) persist(ops []memtree.Op, cuts []int) (uint64, error) {
	ctx := context.Background()
	first := t.last + 1
	var drops [][][]byte
	for _, op := range ops {
		if op.Kind == memtree.OpDropBucket {
			drops = append(drops, op.Path)
		}
	}
	for _, part := range parts(ops, cuts, t.subject) {
		if err := t.write(ctx, t.messages(ops[part[0]:part[1]])); err != nil {
			return 0, err
		}
	}
	// What a deleted bucket held goes; should this not happen, Open
	// skips those keys as older than their bucket.
	for _, path := range drops {
		t.purge(ctx, path, first)
	}
	return t.last, nil
}

// parts splits ops into ranges written one after the other: each takes
// whole writes (they end at cuts) while their distinct subjects number
// at most maxBatch, and at least one write.
func parts(ops []memtree.Op, cuts []int, subject func(memtree.Op) string) [][2]int {
	var out [][2]int
	subjects := map[string]bool{}
	from, end := 0, 0
	for _, cut := range cuts {
		for _, op := range ops[end:cut] {
			subjects[subject(op)] = true
		}
		if end > from && len(subjects) > maxBatch {
			out = append(out, [2]int{from, end})
			from = end
			clear(subjects)
			for _, op := range ops[from:cut] {
				subjects[subject(op)] = true
			}
		}
		end = cut
	}
	if end > from {
		out = append(out, [2]int{from, end})
	}
	return out
}

// messages are the changes as messages: the last of each subject, in the
// order of those last changes, so a bucket created again comes before the
// keys put in it since.
func (t *Tree) messages(ops []memtree.Op) []*nats.Msg {
	lastOf := map[string]int{}
	for i, op := range ops {
		lastOf[t.subject(op)] = i
	}
	var msgs []*nats.Msg
	for i, op := range ops {
		subj := t.subject(op)
		if lastOf[subj] != i {
			continue
		}
		m := nats.NewMsg(subj)
		switch op.Kind {
		case memtree.OpPut:
			m.Data = op.Value
		case memtree.OpSequence:
			m.Data = strconv.AppendUint(nil, op.Seq, 10)
		case memtree.OpDelete, memtree.OpDropBucket:
			m.Header.Set(hdrOp, "del")
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// write publishes msgs in atomic batches of at most maxBatch, each
// expecting the stream where this process left it.
func (t *Tree) write(ctx context.Context, msgs []*nats.Msg) error {
	for len(msgs) > 0 {
		n := min(len(msgs), maxBatch)
		msgs[0].Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(t.last, 10))
		seq, err := t.s.publish(ctx, msgs[:n])
		if errors.Is(err, errExpectation) {
			return fmt.Errorf("jslog: another process wrote to the authority's stream (expected its last sequence at %d): %w", t.last, err)
		}
		if err != nil {
			return err
		}
		t.last, msgs = seq, msgs[n:]
	}
	return nil
}

// purge removes what was stored under a deleted bucket before seq.
func (t *Tree) purge(ctx context.Context, path [][]byte, seq uint64) {
	p, tok := t.s.prefix, pathTokens(path)
	for _, subj := range []string{p + ".k." + tok + ".>", p + ".b." + tok + ".>", p + ".s." + tok, p + ".s." + tok + ".>"} {
		pctx, cancel := t.s.ctx(ctx)
		_ = t.s.stream.Purge(pctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(seq))
		cancel()
	}
}

// stored is one message of the stream as load reads it.
type stored struct {
	kind  string
	path  [][]byte
	key   []byte
	data  []byte
	seq   uint64
	del   bool
	depth int
}

func (t *Tree) parse(subject string, seq uint64, data []byte, del bool) (stored, error) {
	rest, ok := strings.CutPrefix(subject, t.s.prefix+".")
	toks := strings.Split(rest, ".")
	if !ok || len(toks) < 2 {
		return stored{}, fmt.Errorf("subject %s", subject)
	}
	out := stored{kind: toks[0], data: data, seq: seq, del: del}
	names := make([][]byte, 0, len(toks)-1)
	for _, tok := range toks[1:] {
		v, err := untoken(tok)
		if err != nil {
			return stored{}, fmt.Errorf("subject %s: %w", subject, err)
		}
		names = append(names, []byte(v))
	}
	if out.kind == "k" {
		if len(names) < 2 {
			return stored{}, fmt.Errorf("subject %s: a key outside a bucket", subject)
		}
		out.key, names = names[len(names)-1], names[:len(names)-1]
	}
	out.path, out.depth = names, len(names)
	return out, nil
}

// load reads the whole stream into memory.
func (t *Tree) load(ctx context.Context) error {
	ictx, cancel := t.s.ctx(ctx)
	info, err := t.s.stream.Info(ictx)
	cancel()
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	var msgs []stored
	if info.State.Msgs > 0 {
		cons, err := t.s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		it, err := cons.Messages()
		if err != nil {
			return err
		}
		defer it.Stop()
		for {
			m, err := it.Next()
			if err != nil {
				return err
			}
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			st, err := t.parse(m.Subject(), meta.Sequence.Stream, m.Data(), m.Headers().Get(hdrOp) == "del")
			if err != nil {
				return err
			}
			msgs = append(msgs, st)
			if meta.Sequence.Stream >= last || meta.NumPending == 0 {
				break
			}
		}
	}
	if err := t.build(msgs); err != nil {
		return err
	}
	t.last = last
	t.mem.SetID(last)
	return nil
}

// build makes the tree of the stream's messages: a bucket whose marker is
// newer than its parent's, a key or sequence newer than its bucket's.
func (t *Tree) build(msgs []stored) error {
	key := func(path [][]byte) string { return string(pathTokens(path)) }
	born := map[string]uint64{"": 0}
	var buckets []stored
	for _, m := range msgs {
		if m.kind == "b" && !m.del {
			buckets = append(buckets, m)
		}
	}
	slices.SortStableFunc(buckets, func(a, b stored) int { return a.depth - b.depth })
	for _, b := range buckets {
		parent, ok := born[key(b.path[:len(b.path)-1])]
		if !ok || b.seq < parent {
			continue
		}
		if err := t.mem.Apply(memtree.Op{Kind: memtree.OpBucket, Path: b.path}); err != nil {
			return err
		}
		born[key(b.path)] = b.seq
	}
	for _, m := range msgs {
		at, ok := born[key(m.path)]
		if !ok || m.seq < at || m.del || m.kind == "b" {
			continue
		}
		op := memtree.Op{Kind: memtree.OpPut, Path: m.path, Key: m.key, Value: m.data}
		if m.kind == "s" {
			n, err := strconv.ParseUint(string(m.data), 10, 64)
			if err != nil {
				return fmt.Errorf("sequence of %s: %w", key(m.path), err)
			}
			op = memtree.Op{Kind: memtree.OpSequence, Path: m.path, Seq: n}
		}
		if err := t.mem.Apply(op); err != nil {
			return err
		}
	}
	return nil
}
