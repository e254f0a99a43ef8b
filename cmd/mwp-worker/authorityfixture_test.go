package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/jslog"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/queue"
	"github.com/missionweave/mwp-worker/runtime/client"
)

// authorityFixture is `authority serve` on one data directory that the
// test starts, stops and kills as it likes, with human alice and the
// coordinator agent coord enrolled.
type authorityFixture struct {
	t         *testing.T
	bin, dir  string
	data      string // the authority's data directory
	hk, ck    protocol.PrivateKey
	card      protocol.AgentCard
	serveArgs []string
	connects  int
	// store is the NATS servers the log is kept on (--store), "" for
	// DIR/authority.db.
	store string
}

// onNATS keeps the fixture's log in a stream of the NATS servers at urls,
// kept by replicas of them.
func (f *authorityFixture) onNATS(urls string, replicas int) {
	f.store = urls
	f.serveArgs = append(f.serveArgs, "--store", urls, "--store-replicas", fmt.Sprint(replicas))
}

// openLog opens the stopped authority's log in this process.
func (f *authorityFixture) openLog() *authoritylite.Service {
	f.t.Helper()
	cfg := authoritylite.Config{Dir: f.data}
	if f.store != "" {
		tr, err := jslog.OpenTree(context.Background(), jslog.Config{URLs: f.store, Stream: "MWPLOG", Subjects: "mwplog"})
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.Store, cfg.StoreName = tr, "test stream"
	}
	svc, err := authoritylite.Open(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return svc
}

func newAuthorityFixture(t *testing.T) *authorityFixture {
	t.Helper()
	return newAuthorityFixtureOf(t, buildBinary(t))
}

// newAuthorityFixtureOf is newAuthorityFixture with the binary given.
func newAuthorityFixtureOf(t *testing.T, bin string) *authorityFixture {
	t.Helper()
	f := &authorityFixture{t: t, bin: bin, dir: t.TempDir()}
	keys := filepath.Join(f.dir, "keys")
	f.hk = writeKey(t, keys, "alice", protocol.ActorHuman, "alice")
	f.ck = writeKey(t, keys, "coord", protocol.ActorAgent, "coord")
	f.data = filepath.Join(f.dir, "authority")
	var enroll string
	enroll, f.card = coordinatorEnrollment(t, f.dir, f.ck)
	f.serveArgs = []string{"authority", "serve", "--data", f.data, "--listen", "127.0.0.1:0", "--human", "alice=" + filepath.Join(keys, "alice.pub"), "--enroll", enroll}
	return f
}

var (
	listeningLine   = regexp.MustCompile(`listening on (wss://127\.0\.0\.1:\d+/mwp)`)
	fingerprintLine = regexp.MustCompile(`certificate fingerprint (sha256:[0-9a-f]{64})`)
)

// connect waits for p to listen and connects the coordinator, opening its
// session on the first connection, each with a store of its own.
func (f *authorityFixture) connect(p *proc) *coordinator {
	f.t.Helper()
	f.connects++
	url := p.await(f.t, listeningLine, 10*time.Second)[1]
	fp := p.await(f.t, fingerprintLine, 5*time.Second)[1]
	apub, err := protocol.LoadPublicKey(filepath.Join(f.data, "authority.pub"))
	if err != nil {
		f.t.Fatal(err)
	}
	store, err := queue.Open(filepath.Join(f.dir, fmt.Sprintf("coord-%d", f.connects)), queue.Options{NoSocket: true})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { store.Close() })
	cfg := client.Config{URL: url, Trust: client.Trust{Pin: fp}, AgentID: "coord", Key: f.ck, Store: store, AuthorityKeys: protocol.NewKeySet(apub)}
	if f.connects == 1 {
		return openCoordinator(f.t, cfg, f.card)
	}
	return connectCoordinator(f.t, cfg, 1)
}
