package authoritylite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"
	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/internal/storecheck"
	"github.com/missionweave/mwp-worker/protocol"
)

// Config configures a Service.
type Config struct {
	// Dir holds authority.db, the authority key and the artifact store.
	Dir string
	// Clock is the authority's time; nil means the real clock.
	Clock clock.Clock
	// Key signs every event. Zero means load DIR/authority.key, creating it
	// on first start.
	Key protocol.PrivateKey
	// ID is the acceptedBy of every event; default "authority-1".
	ID      string
	MaxSkew time.Duration
	Limits  group.Limits
	Policy  Policy
	// OfflineGrace is how long past a lease's expiry buffered offline work
	// is still accepted (spec 11.5); zero means OfflineGrace.
	OfflineGrace time.Duration
	// RetainEvents, when not zero, keeps about that many events of each
	// Group online: a Group twice past it is snapshotted and compacted.
	RetainEvents uint64
	// ArchiveAfter, when not zero, archives a Group whose Mission and
	// WorkItems are all terminal once its last event is that old
	// (archive.go).
	ArchiveAfter time.Duration
	// PurgeAfter, when not zero, deletes a Group archived that long ago
	// (and at least receiptWindow): its id and last sequence stay (purge.go).
	PurgeAfter time.Duration
	// ReceiptWindow, when not zero, replaces how long a receipt nothing
	// else needs is kept (default: 2×MaxSkew + OfflineGrace, purge.go).
	// Tests and soaks shorten it to see the store level off sooner.
	ReceiptWindow time.Duration
	// ClosedRegistration refuses self-signed Agent Cards of unknown agents;
	// then only agents registered with RegisterAgent may join.
	ClosedRegistration bool
	// RateBurst and RateEvery bound each actor's messages (spec 20's
	// message rate); zero RateBurst means a burst of 60, then one a second.
	RateBurst int
	RateEvery time.Duration
	// ProposalBurst and ProposalEvery bound each actor's work.propose
	// (spec 20's proposal rate), a bucket of its own; zero ProposalBurst
	// takes RateBurst and RateEvery.
	ProposalBurst int
	ProposalEvery time.Duration
	// Init allows a new, empty log beside an existing DIR/authority.key
	// (`authority serve --init`); without it Open refuses a key whose log
	// is missing or empty (LOG_MISSING), and with it Open refuses a log that
	// exists (LOG_EXISTS). A first start, with neither file, creates both
	// either way; a Config.Key is never "existing".
	Init bool
	// OpenCheckEvents is how many of each Group's newest events Open
	// verifies before serving (zero: DefaultOpenCheckEvents); the rest are
	// verified in the background (integrity.go).
	OpenCheckEvents int
	// CreateBurst and CreateEvery bound each human's mission.create and
	// mission.create_follow_up, every one of which is a new Group (spec
	// 20); zero CreateBurst means 20 at once, then one every 3 s.
	CreateBurst int
	CreateEvery time.Duration
	// VerifyEvery is how often the background verifies the events
	// appended since its last pass and records how far it got, so the next
	// start verifies only what is newer (verified.go); zero means
	// DefaultVerifyEvery.
	VerifyEvery time.Duration
	// NoSync skips fsync (benchmarks of the pipeline alone; never in use).
	NoSync bool
	// Store, when not nil, is the log instead of DIR/authority.db (a
	// jslog.Tree: the log in a NATS JetStream stream); Close closes it.
	// StoreName names it in errors and log lines.
	Store     logstore.Tree
	StoreName string
	Logger    *slog.Logger

	// checkpointEvery overrides defaultCheckpointEvery (tests).
	checkpointEvery uint64
}

// Service is authority-lite: one Organization service and one logical
// Group service over a bbolt log. It implements the wss Backend and is
// also called in-process by embedded workers.
type Service struct {
	cfg       Config
	db        *logDB
	identity  LogIdentity
	head      *head
	integrity integrity
	clock     clock.Clock
	key       protocol.PrivateKey
	log       *slog.Logger
	inbound   protocol.Inbound
	org       *org
	profiles  profileRegistry

	// orgMu serializes Organization commands and Group creation; it is
	// taken before any Group lock.
	orgMu  sync.Mutex
	mu     sync.Mutex // guards groups
	groups map[string]*groupState
	acks   map[string]uint64
	rates  *rateLimiter // messages, per actor
	// proposals is work.propose's own bucket, per actor: a chatty agent's
	// messages do not use up its proposals, nor the other way round.
	proposals *rateLimiter
	writer    *writer
	m         *metrics
	// refusals samples the INFO lines about refused commands.
	refusals refusalLog
	// creates limits mission.create and create_follow_up, per human.
	creates *rateLimiter

	closeOnce sync.Once
	closeErr  error
	// receipts answers retries: in flight, recent, stored.
	receipts *receiptBook
	// holdFollowUps, in tests, leaves follow-ups pending as a crash right
	// after the owing commit would.
	holdFollowUps bool
	// snaps are the snapshot documents beside the log.
	snaps        *snapshotFiles
	memberNotice memberNotice
	archiver     archiver
	released     releasedTimes
	// unread counts the placeholders whose stub is not read yet.
	unread atomic.Int64

	// holdRelease, in tests, leaves an archived Group unreleased as a
	// crash right after the archive's commit would.
	holdRelease bool
}

// groupState is one Group's single writer: its decision state, members and
// log position, all guarded by mu.
type groupState struct {
	mu      sync.Mutex
	id      string
	g       *group.Group
	members group.Members             // by group.MemberKey
	usage   map[string]protocol.Usage // workItemId -> used
	msgs    group.Messages            // lazily rebuilt from the log
	grants  group.Grants              // cooperation-override grants
	leases  map[string]*leaseRecord   // every execution lease, by id
	// openLeases is the leases not closed, by WorkItem: trackLeases visits
	// only the touched items' instead of every lease the Group ever had.
	openLeases map[string][]*leaseRecord
	// counts is what the counted policy limits read (countsFor).
	counts   itemCounts
	last     uint64
	first    uint64 // lowest sequence online
	archived bool
	// missionID names the Group's Mission, for ancestry lookups.
	missionID string
	// descendants is what descendant Missions' Groups have charged.
	descendants protocol.Usage
	// artifacts is each published content hash's revision.
	artifacts group.Artifacts
	// saved is what the store's decision-state records hold.
	saved savedState
	// verified is the last sequence read back and verified (verified.go);
	// only Open and the background check write it.
	verified atomic.Uint64
	// markRead is set once verified holds the stored mark's.
	markRead atomic.Bool
	// stub is set while an archived Group's decision state is released
	// (archive.go); archiveRef is its archive snapshot.
	stub       atomic.Bool
	archiveRef *protocol.SnapshotRef
	// lazy is set on a placeholder whose stub is not read yet; only
	// archiveRef-free fields id, changed, stub and archived hold.
	lazy atomic.Bool

	nmu     sync.Mutex
	changed chan struct{}              // closed and replaced on every append
	waiters map[*changeWaiter]struct{} // OnChange callbacks, fired and dropped on every append
	tail    eventTail
}

// Open opens (creating when new) the authority's store in cfg.Dir and loads
// every Group.
func Open(cfg Config) (*Service, error) {
	if cfg.Dir == "" {
		return nil, errors.New("authority: a data directory is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	cfg.fill()
	logPath := filepath.Join(cfg.Dir, LogFile)
	logExists, err := logFileState(logPath)
	if cfg.Store != nil {
		logExists, err = treeState(cfg.Store)
	}
	if err != nil {
		return nil, err
	}
	keyExisted := false
	if cfg.Key.KeyID == "" {
		if cfg.Key, keyExisted, err = openKey(cfg.Dir, cfg.ID, logExists); err != nil {
			return nil, err
		}
	}
	if keyExisted && !logExists && !cfg.Init {
		// Refused before bbolt creates the file.
		return nil, errLogMissing(cfg.Dir)
	}
	db := &logDB{tree: cfg.Store, path: cfg.StoreName, log: cfg.Logger}
	if cfg.Store == nil {
		if _, err := preOpen(logPath); err != nil {
			return nil, err
		}
		bdb, err := openBolt(logPath, cfg.NoSync)
		if err != nil {
			return nil, err
		}
		db = &logDB{tree: boltlog.Tree{DB: bdb}, bolt: bdb, path: logPath, log: cfg.Logger}
	}
	s := &Service{cfg: cfg, db: db, clock: cfg.Clock, key: cfg.Key, log: cfg.Logger, groups: map[string]*groupState{}, acks: map[string]uint64{}}
	s.integrity.groups, s.integrity.db, s.integrity.log = map[string]*protocol.Error{}, db, cfg.Logger
	s.snaps = &snapshotFiles{dir: cfg.Dir, db: db, log: cfg.Logger} // its writer once there is one
	// Nothing is written before the log is known to be this key's and
	// whole: a commit would overwrite a damaged meta page and hide the loss.
	var txid uint64
	var create bool
	err = db.View(func(tx logstore.Tx) error {
		txid = uint64(tx.ID())
		var err error
		s.identity, create, err = checkIdentity(tx, cfg.Dir, cfg.Key.Public(), keyExisted, cfg.Init, cfg.Clock.Now())
		return err
	})
	if err == nil && !create {
		err = checkHead(cfg.Dir, s.identity, txid)
	}
	if err == nil && create {
		err = db.Update(func(tx logstore.Tx) error {
			var err error
			s.identity, _, err = checkIdentity(tx, cfg.Dir, cfg.Key.Public(), keyExisted, cfg.Init, cfg.Clock.Now())
			return err
		})
		cfg.Logger.Info("recorded the log's identity", "log", s.identity.LogID, "key", s.identity.KeyID)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	s.rates, s.proposals, s.creates = limiters(cfg)
	s.org = newOrg(s)
	s.inbound = protocol.Inbound{Keys: s.org, MaxSkew: cfg.MaxSkew, Known: s.profiles.known}
	if err := db.Update(createRootBuckets); err != nil {
		db.Close()
		return nil, fmt.Errorf("authority: %w", err)
	}
	unmarked, err := s.load()
	if err == nil {
		err = s.markStateSeq(unmarked)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	if cfg.OpenCheckEvents <= 0 {
		cfg.OpenCheckEvents = DefaultOpenCheckEvents
	}
	s.verifyTail(cfg.OpenCheckEvents)
	if s.head, err = openHead(cfg.Dir, s.identity.LogID); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.View(func(tx logstore.Tx) error { s.head.record(uint64(tx.ID())); return nil }); err != nil {
		s.head.close()
		db.Close()
		return nil, err
	}
	s.receipts = newReceiptBook(db)
	s.m = newMetrics()
	s.writer = newWriter(db, s.head, s.m)
	s.snaps.writer = s.writer
	if err := s.resumeFollowUps(); err != nil {
		s.writer.close()
		s.head.close()
		db.Close()
		return nil, err
	}
	s.releaseArchived()
	if err := s.snaps.redoGone(); err != nil {
		s.writer.close()
		s.head.close()
		db.Close()
		return nil, err
	}
	s.startBackgroundCheck()
	if err := s.startArchiver(); err != nil {
		s.stopBackgroundCheck()
		s.writer.close()
		s.head.close()
		db.Close()
		return nil, err
	}
	events, loaded := uint64(0), s.loadedGroupIDs()
	for _, id := range loaded {
		events += s.LastSequence(id)
	}
	released := len(s.groups) - len(loaded)
	s.log.Info("authority log opened", "dir", cfg.Dir, "groups", len(s.groups), "archivedGroups", released, "eventsOfOthers", events, "agents", len(s.org.agents), "eventKey", s.key.KeyID)
	return s, nil
}

// treeState reports whether a store holds a log already (any bucket).
func treeState(t logstore.Tree) (bool, error) {
	exists := false
	err := t.View(func(tx logstore.Tx) error {
		return tx.ForEach(func([]byte) error { exists = true; return nil })
	})
	if err != nil {
		return false, fmt.Errorf("authority: open store: %w", err)
	}
	return exists, nil
}

// fill gives the unset fields of cfg that Service keeps their defaults.
func (cfg *Config) fill() {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.ID == "" {
		cfg.ID = "authority-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Limits = cfg.Limits.WithDefaults()
}

// openBolt opens the log's bbolt file, telling a damaged file and one
// another process holds from other failures.
func openBolt(logPath string, noSync bool) (*bolt.DB, error) {
	bdb, err := storecheck.Open(logPath, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: noSync})
	switch {
	case err == nil:
		return bdb, nil
	case storecheck.IsPanic(err) || errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch):
		return nil, damaged(logPath, "", err)
	case errors.Is(err, bolt.ErrTimeout):
		return nil, lockedLog(logPath, err)
	}
	return nil, fmt.Errorf("authority: open store: %w", err)
}

// limiters are the message, proposal and Group-creation rate limits of
// spec 20, from cfg or their defaults.
func limiters(cfg Config) (rates, proposals, creates *rateLimiter) {
	if cfg.RateBurst == 0 {
		cfg.RateBurst, cfg.RateEvery = 60, time.Second
	}
	if cfg.ProposalBurst == 0 {
		cfg.ProposalBurst, cfg.ProposalEvery = cfg.RateBurst, cfg.RateEvery
	}
	if cfg.CreateBurst == 0 {
		cfg.CreateBurst, cfg.CreateEvery = 20, 3*time.Second
	}
	return &rateLimiter{Burst: cfg.RateBurst, Every: cfg.RateEvery}, &rateLimiter{Burst: cfg.ProposalBurst, Every: cfg.ProposalEvery},
		&rateLimiter{Burst: cfg.CreateBurst, Every: cfg.CreateEvery}
}

// Close checkpoints every Group's state and closes the store. In-flight
// Submit calls must have returned.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.stopArchiver()
		s.stopBackgroundCheck()
		if err := s.checkpointAll(); err != nil {
			s.log.Error("checkpoint at close failed; the next open folds the log again", "err", err)
		}
		s.writer.close()
		s.head.close()
		s.closeErr = s.db.Close()
		s.log.Info("authority log closed", "dir", s.cfg.Dir, "err", s.closeErr)
	})
	return s.closeErr
}

// Failed is closed when a write to the log has failed. From then on memory
// may be ahead of the disk, every command is refused with INTERNAL_ERROR,
// and the process should exit so that a supervisor restarts it: Open
// reloads what is durable (docs/operations.md). Err says why.
func (s *Service) Failed() <-chan struct{} { return s.writer.brokenCh }

// Err is the failed write behind Failed, or nil.
func (s *Service) Err() error { return s.writer.err() }

// Now is the authority's clock.
func (s *Service) Now() time.Time { return s.clock.Now() }

// PublicKey is the authority's event-signing key.
func (s *Service) PublicKey() protocol.VerifyingKey { return s.key.Public() }

// ID is the acceptedBy of the authority's events.
func (s *Service) ID() string { return s.cfg.ID }

// Identity is the log's recorded identity: its id, creation time and key.
func (s *Service) Identity() LogIdentity { return s.identity }

// Dir is the data directory.
func (s *Service) Dir() string { return s.cfg.Dir }

func loadOrCreateKey(dir, id string) (protocol.PrivateKey, error) {
	path := filepath.Join(dir, KeyFile)
	if k, err := protocol.LoadPrivateKey(path); err == nil {
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return protocol.PrivateKey{}, fmt.Errorf("authority: %w", err)
	}
	k, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorService, id, "k1"), rand.Reader)
	if err != nil {
		return protocol.PrivateKey{}, err
	}
	if _, _, err := protocol.WriteKeyFiles(dir, "authority", k); err != nil {
		return protocol.PrivateKey{}, fmt.Errorf("authority: %w", err)
	}
	return k, nil
}

// load reads every Group's state from the store. It returns the Groups
// whose store has no stateSeq marker yet.
func (s *Service) load() ([]string, error) {
	var unmarked, ids []string
	err := s.db.View(func(tx logstore.Tx) error {
		if err := s.org.load(tx); err != nil {
			return err
		}
		if rb := tx.Bucket(bucketReleased); rb != nil {
			if err := rb.ForEach(func(k, v []byte) error {
				s.groups[string(k)] = placeholder(string(k))
				if s.cfg.PurgeAfter > 0 {
					at, ok := releasedAt(v)
					if !ok {
						at = s.clock.Now() // released before the times were kept: from this start
					}
					s.released.note(string(k), at)
				}
				s.unread.Add(1)
				return nil
			}); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketGroups).ForEachBucket(func(k []byte) error {
			if s.groups[string(k)] == nil {
				ids = append(ids, string(k))
			}
			return nil
		})
	})
	if err != nil {
		if ReasonOf(err) == "" {
			err = damaged(s.db.path, "", err) // Organization records that do not decode
		}
		return nil, err
	}
	// One transaction per Group: a damaged Group is kept, not served,
	// and does not keep the others from loading.
	for _, id := range ids {
		var gs *groupState
		var marked bool
		err := s.integrity.view(id, func(tx logstore.Tx) error {
			var err error
			if gb, _ := openGroupBuckets(tx, id, false); gb != nil && stubbable(gb) {
				gs, err = s.readStub(gb, id)
				marked = true
				return err
			}
			gs, marked, err = s.readGroup(tx, id)
			return err
		})
		if err != nil {
			s.integrity.mark(id, err)
			s.groups[id] = newGroupState(id, s.cfg.Limits)
			continue
		}
		s.groups[gs.id] = gs
		if !marked {
			unmarked = append(unmarked, gs.id)
		}
	}
	return unmarked, nil
}

func (s *Service) readGroup(tx logstore.Tx, id string) (*groupState, bool, error) {
	gb, err := openGroupBuckets(tx, id, false)
	if err != nil || gb == nil {
		return nil, false, fmt.Errorf("authority: group %s: %v", id, err)
	}
	gs := newGroupState(id, s.cfg.Limits)
	if _, err := getJSON(gb.meta, keyDescendants, &gs.descendants); err != nil {
		return nil, false, err
	}
	if _, err := getJSON(gb.meta, keyArtifacts, &gs.artifacts); err != nil {
		return nil, false, err
	}
	if gs.artifacts == nil {
		gs.artifacts = map[string]uint64{}
	}
	if _, err := getJSON(gb.meta, keyMembers, &gs.members); err != nil {
		return nil, false, err
	}
	if _, err := getJSON(gb.meta, keyUsage, &gs.usage); err != nil {
		return nil, false, err
	}
	if _, err := getJSON(gb.meta, keyGrants, &gs.grants); err != nil {
		return nil, false, err
	}
	if gs.grants == nil {
		gs.grants = map[string]*grantRecord{}
	}
	if _, err := getJSON(gb.meta, keyLeases, &gs.leases); err != nil {
		return nil, false, err
	}
	if gs.leases == nil {
		gs.leases = map[string]*leaseRecord{}
	}
	if gb.leases != nil {
		// One record per lease, newer than the single value of old stores.
		if err := gb.leases.ForEach(func(k, v []byte) error {
			var rec leaseRecord
			if _, err := getJSON(gb.leases, k, &rec); err != nil {
				return err
			}
			gs.leases[string(k)] = &rec
			return nil
		}); err != nil {
			return nil, false, err
		}
	}
	gs.indexOpenLeases()
	marked, err := loadState(gs, gb)
	if err != nil {
		return nil, false, err
	}
	gs.counts.count(gs.g.Items)
	if gs.g.Mission != nil {
		gs.missionID = gs.g.Mission.MissionID
	}
	if gs.members == nil {
		gs.members = map[string]*protocol.Membership{}
	}
	if gs.usage == nil {
		gs.usage = map[string]protocol.Usage{}
	}
	gs.last = lastSeq(gb.events)
	gs.tail.last.Store(gs.last)
	gs.first, gs.archiveRef = onlineFrom(gb)
	gs.archived = gb.meta.Get(keyArchived) != nil
	return gs, marked, nil
}

func (s *Service) group(id string) *groupState {
	gs := s.peekGroup(id)
	s.ensureLoaded(gs)
	return gs
}

// peekGroup is a Group as held in memory, without loading the state of
// an archived one (a placeholder's stub is read).
func (s *Service) peekGroup(id string) *groupState {
	gs := s.rawGroup(id)
	if gs != nil && gs.lazy.Load() {
		s.fillStub(gs)
	}
	return gs
}

// rawGroup is peekGroup that leaves a placeholder as it is.
func (s *Service) rawGroup(id string) *groupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[id]
}

// loadedGroupIDs lists, sorted, the Groups that are not placeholders.
func (s *Service) loadedGroupIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.groups))
	for id, gs := range s.groups {
		if !gs.lazy.Load() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// GroupIDs lists every Group, sorted.
func (s *Service) GroupIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func newEventID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "evt-" + hex.EncodeToString(b[:])
}

func (gs *groupState) notify() {
	gs.nmu.Lock()
	close(gs.changed)
	gs.changed = make(chan struct{})
	ws := gs.takeWaitersLocked()
	gs.nmu.Unlock()
	for w := range ws {
		w.fire()
	}
}

// Submit runs one signed Command through the whole pipeline (spec 15.1)
// and returns its receipt once its events are durable. peer, when not
// empty, is the agent authenticated on the connection; an agent command
// must be signed by that agent.
func (s *Service) Submit(ctx context.Context, peer string, raw []byte) (*protocol.Receipt, error) {
	return s.Begin(ctx, peer, raw)()
}

// Begin is Submit in two steps: it decides the Command now, and the
// function it returns waits until the decision's events are durable and
// answers. That function must be called once, without delay: it signs the
// events, and the Group's later writes wait for them. A connection begins
// its Commands of a Group one after the other, so they are decided in
// arrival order, and waits for them together, so one group commit carries
// several of them.
func (s *Service) Begin(ctx context.Context, peer string, raw []byte) func() (*protocol.Receipt, error) {
	var typ protocol.CommandType
	r, durable, err := s.submit(ctx, peer, raw, &typ)
	return func() (*protocol.Receipt, error) {
		if err == nil && durable != nil {
			err = durable()
		}
		s.m.command(typ, err)
		if err != nil {
			s.refusals.refused(s.log, s.clock.Now(), typ, err)
			return nil, err
		}
		return r, nil
	}
}

// submit decides a Command and sets *typ once it is decoded. The receipt
// holds once durable, which waits for the decision's writes (nil when
// there are none to wait for), returns nil.
func (s *Service) submit(ctx context.Context, peer string, raw []byte, typ *protocol.CommandType) (*protocol.Receipt, func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "submit: %v", err)
	}
	if err := s.failedWrite(); err != nil {
		return nil, nil, err
	}
	now := s.clock.Now()
	inbound := s.inbound
	if keys := s.selfRegistrationKeys(raw); keys != nil {
		inbound.Keys = keys
	}
	in, err := inbound.DecodeCommand(raw, now)
	if err != nil {
		// A byte-identical retry of an accepted command gets its receipt
		// even when it is no longer fresh (spec 15.1).
		if rec, ok := s.replayed(raw); ok {
			return rec, nil, nil
		}
		return nil, nil, err
	}
	cmd := in.Command
	*typ = cmd.Type
	if peer != "" && cmd.Actor.Kind == protocol.ActorAgent && cmd.Actor.ID != peer {
		return nil, nil, protocol.Forbidden("the connection is authenticated as %s; it cannot send %s's commands", peer, cmd.Actor.ID)
	}
	canon, err := in.CanonicalBytes()
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "canonical bytes: %v", err)
	}
	c := &call{s: s, cmd: cmd, digest: protocol.Digest(canon), now: now}
	if c.payload, err = decodePayload(cmd, in.Value["payload"]); err != nil {
		return nil, nil, err
	}
	switch cmd.Type {
	case protocol.CmdAgentCardRegister, protocol.CmdSessionOpen:
		r, err := s.org.submit(c)
		return r, nil, err
	case protocol.CmdMissionCreate, protocol.CmdMissionCreateFollowUp:
		r, err := s.createMission(c)
		return r, nil, err
	}
	if cmd.GroupID == "" {
		return nil, nil, protocol.InvalidCommand("%s is Group-scoped: groupId is required", cmd.Type).At("/groupId")
	}
	gs := s.peekGroup(cmd.GroupID) // an archived one refuses commands as it is
	if gs == nil {
		return nil, nil, group.GroupNotFound(cmd.GroupID)
	}
	if err := s.integrity.damage(cmd.GroupID); err != nil {
		return nil, nil, err
	}
	// The store is read outside the lock; checkActionID completes it.
	c.prior = s.receipts.lookup(cmd.Actor, cmd.ActionID)
	gs.mu.Lock()
	r, p, wait, err := s.decideInGroup(c, gs)
	gs.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return r, func() error {
		if wait != nil {
			if err := wait(); err != nil {
				return err
			}
		}
		if p != nil {
			s.followEffects(c, p)
		}
		if p != nil && p.archived {
			if !s.holdRelease {
				s.afterArchive(gs)
			}
			return nil
		}
		s.maybeCompact(gs)
		return nil
	}, nil
}

// replayed answers a byte-identical retry of an accepted command with its
// original receipt, before freshness is checked: a retry keeps its signed
// bytes, so it may come long after issuedAt (spec 15.1).
func (s *Service) replayed(raw []byte) (*protocol.Receipt, bool) {
	v, err := protocol.Parse(raw, s.inbound.Decode)
	if err != nil {
		return nil, false
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	actor, _ := doc["actor"].(map[string]any)
	kind, _ := actor["kind"].(string)
	id, _ := actor["id"].(string)
	actionID, _ := doc["actionId"].(string)
	if kind == "" || id == "" || actionID == "" {
		return nil, false
	}
	canon, err := protocol.Canonical(doc)
	if err != nil {
		return nil, false
	}
	rec, ok := s.receipts.get(protocol.Actor{Kind: protocol.ActorKind(kind), ID: id}, actionID)
	if !ok || rec.Digest != protocol.Digest(canon) {
		return nil, false
	}
	r := rec.Receipt
	return &r, true
}

// checkActionID refuses a used (actor, actionId) whose content differs; the
// byte-identical retry was answered by replayed.
func (s *Service) checkActionID(c *call) error {
	if f := s.receipts.inflightFor(receiptKey(c.cmd.Actor, c.cmd.ActionID)); f != nil {
		if f.digest != c.digest {
			return protocol.WithDetails(protocol.Errorf(protocol.CodeActionIDCollision,
				"actionId %s is in use by %s %s for different content", c.cmd.ActionID, c.cmd.Actor.Kind, c.cmd.Actor.ID), "actionId", c.cmd.ActionID)
		}
		<-f.done
		if f.err != nil {
			return protocol.Errorf(protocol.CodeInternalError, "the original command was not stored: %v", f.err)
		}
		return errReplay{*f.receipt}
	}
	rec, ok := s.receipts.now(c.cmd.Actor, c.cmd.ActionID, c.prior)
	if !ok {
		return nil
	}
	if rec.Digest == c.digest {
		return errReplay{rec.Receipt}
	}
	return protocol.WithDetails(protocol.Errorf(protocol.CodeActionIDCollision,
		"actionId %s was already used by %s %s for different content", c.cmd.ActionID, c.cmd.Actor.Kind, c.cmd.Actor.ID),
		"actionId", c.cmd.ActionID)
}

// errReplay carries the original receipt of a retry noticed under the lock.
type errReplay struct{ receipt protocol.Receipt }

func (errReplay) Error() string { return "replayed command" }

// decodePayload decodes the typed payload of cmd from parsed, the payload
// as DecodeCommand parsed it, so it is not parsed a second time.
func decodePayload(cmd *protocol.Command, parsed any) (any, error) {
	p := protocol.PayloadFor(cmd.Type)
	if p == nil {
		return nil, protocol.InvalidCommand("unknown command type %s", cmd.Type).At("/type")
	}
	if err := protocol.DecodeExactParsed(cmd.Payload, parsed, p, protocol.CodeSchemaValidationFailed); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, protocol.Errorf(protocol.CodeSchemaValidationFailed, "payload: %v", err).At("/payload")
	}
	return p, nil
}

// selfRegistrationKeys lets an unknown agent's first agent_card_register be
// verified with the keys of the card it carries (open registration); the
// card's own signature is checked again when the command is decided.
func (s *Service) selfRegistrationKeys(raw []byte) protocol.KeyResolver {
	if s.cfg.ClosedRegistration {
		return nil
	}
	keys, id := s.cardKeys(raw)
	if keys == nil || s.org.agent(id) != nil {
		return nil
	}
	return keys
}

// cardKeys returns the keys of the agent card an agent's own
// agent_card_register carries, and the agent's id; nil for any other
// document.
func (s *Service) cardKeys(raw []byte) (protocol.KeySet, string) {
	if !bytes.Contains(raw, []byte(protocol.CmdAgentCardRegister)) {
		return nil, ""
	}
	v, err := protocol.Parse(raw, s.inbound.Decode)
	if err != nil {
		return nil, ""
	}
	doc, _ := v.(map[string]any)
	if doc["type"] != string(protocol.CmdAgentCardRegister) {
		return nil, ""
	}
	actor, _ := doc["actor"].(map[string]any)
	id, _ := actor["id"].(string)
	if actor["kind"] != string(protocol.ActorAgent) {
		return nil, ""
	}
	payload, _ := doc["payload"].(map[string]any)
	card, _ := payload["agentCard"].(map[string]any)
	list, _ := card["keys"].([]any)
	keys := protocol.KeySet{}
	for _, item := range list {
		raw, err := protocol.Canonical(item)
		if err != nil {
			return nil, ""
		}
		var pk protocol.PublicKey
		if json.Unmarshal(raw, &pk) != nil {
			return nil, ""
		}
		vk, err := protocol.DecodePublicKey(pk)
		if err != nil || !protocol.KeyBelongsTo(vk.KeyID, protocol.ActorAgent, id) {
			continue
		}
		keys[vk.KeyID] = vk.Key
	}
	return keys, id
}

// maybeCompact applies the online retention after an append.
func (s *Service) maybeCompact(gs *groupState) {
	keep := s.cfg.RetainEvents
	if keep == 0 {
		return
	}
	gs.mu.Lock()
	due := gs.last >= gs.first+2*keep
	gs.mu.Unlock()
	if !due {
		return
	}
	if _, err := s.Compact(gs.id, keep); err != nil {
		s.log.Error("compaction failed", "group", gs.id, "err", err)
	}
}

// failedWrite refuses every command once a write has failed: memory may be
// ahead of the disk from then on, so nothing may be decided on it.
func (s *Service) failedWrite() error {
	if err := s.writer.err(); err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "the authority stopped accepting commands after a failed write: %v", err)
	}
	return nil
}
