package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
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

	// One event changed in place (a damaged copy): still printed, and
	// then one line naming it and exit 1, in both forms.
	logPath := filepath.Join(adir, authoritylite.LogFile)
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte(`"messageId":"m2"`)); n == 0 {
		t.Fatal("the second message is not in the file as written")
	}
	if err := os.WriteFile(logPath, bytes.ReplaceAll(raw, []byte(`"messageId":"m2"`), []byte(`"messageId":"m9"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--json"}, {}} {
		code, out, stderr := runCLI(t, append([]string{"inspect", "events", "--data", dir}, args...)...)
		if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 3 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
			!strings.Contains(stderr, "1 of 4 events fail verification (grp-a 4)") || !strings.Contains(stderr, "AUTH_INVALID_SIGNATURE") {
			t.Fatalf("inspect events %v of a damaged log: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
}
