package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

func TestInspectEvents(t *testing.T) {
	dir := t.TempDir()
	adir := filepath.Join(dir, "authority") // the poc --data layout
	svc, err := authoritylite.Open(authoritylite.Config{Dir: adir})
	if err != nil {
		t.Fatal(err)
	}
	hk, _ := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorHuman, "alice", "k1"), rand.Reader)
	if err := svc.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		t.Fatal(err)
	}
	alice := svc.Principal(protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}, hk)
	ctx := context.Background()
	if _, err := alice.Do(ctx, protocol.CmdMissionCreate, "grp-a", &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m1", "m2"} {
		if _, err := alice.Do(ctx, protocol.CmdMessagePost, "grp-a", &protocol.PostMessagePayload{MessageID: id, ConversationID: "c", Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	pub := svc.PublicKey()
	svc.Close()

	code, out, stderr := runCLI(t, "inspect", "events", "--data", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 { // mission.created, membership.changed, two messages
		t.Fatalf("%d lines: %q", len(lines), out)
	}
	for i, line := range lines {
		doc, err := protocol.Parse([]byte(line), protocol.DecodeOptions{})
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if err := protocol.Verify(doc.(map[string]any), protocol.NewKeySet(pub)); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		var ev protocol.Event
		_ = json.Unmarshal([]byte(line), &ev)
		if ev.Seq() != uint64(i+1) {
			t.Fatalf("line %d has sequence %d", i, ev.Seq())
		}
	}
	if code, _, _ := runCLI(t, "inspect", "events", "--data", dir); code != 0 {
		t.Fatalf("table output: exit %d", code)
	}
	if code, _, stderr := runCLI(t, "inspect", "events", "--data", t.TempDir()); code != 1 || !strings.Contains(stderr, "authority.db") {
		t.Fatalf("missing log: exit %d %q", code, stderr)
	}
}
