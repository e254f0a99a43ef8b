package embed

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// An Actor reads the log as the authority signed it, waits on it, stores
// and returns artifact bytes, and answers for unknown agents with a code.
// (coordinator's tests assert it has coordinator.Authority's method set:
// embed does not import the coordinator.)
func TestActorReadsWaitsAndStores(t *testing.T) {
	a, err := Start(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	hk, err := protocol.GenerateKey(protocol.KeyIDFor(protocol.ActorHuman, "ann", "k1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Service.AddPrincipal(protocol.ActorHuman, "ann", hk.Public()); err != nil {
		t.Fatal(err)
	}
	human := protocol.Actor{Kind: protocol.ActorHuman, ID: "ann"}
	act := NewActor(a.Service, human)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := act.SessionEpoch(); got != 0 {
		t.Fatalf("a human's session epoch is %d", got)
	}
	waited := make(chan error, 1)
	go func() {
		// The Group does not exist yet: Wait holds until ctx ends.
		wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer wcancel()
		waited <- act.Wait(wctx, "grp-a", 0)
	}()
	if err := <-waited; err == nil {
		t.Fatal("Wait on a Group without events returned nil")
	}
	_, raw, err := protocol.BuildCommand(human, hk, protocol.CmdMissionCreate, protocol.Envelope{GroupID: "grp-a"},
		&protocol.CreateMissionPayload{MissionID: "mis-a", Title: "A", Objective: "a", PriorityClass: protocol.PriorityNormal}, a.Service.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := act.Submit(ctx, raw); err != nil {
		t.Fatal(err)
	}
	if err := act.Wait(ctx, "grp-a", 0); err != nil {
		t.Fatalf("Wait after an event: %v", err)
	}
	evs, err := act.Events(ctx, "grp-a", 0, 0)
	if err != nil || len(evs) == 0 || evs[0].Sequence != 1 {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	if evs2, _ := act.Events(ctx, "grp-a", 0, 1); len(evs2) != 1 {
		t.Fatalf("max 1 gave %d events", len(evs2))
	}
	d, uri, err := act.PutArtifact(ctx, []byte("bytes"))
	if err != nil || d != protocol.Digest([]byte("bytes")) || uri != "mwp-artifact:"+d {
		t.Fatalf("PutArtifact = %s %s %v", d, uri, err)
	}
	if b, err := act.Artifact(ctx, d); err != nil || string(b) != "bytes" {
		t.Fatalf("Artifact = %q %v", b, err)
	}
	if _, err := act.AgentCard(ctx, "nobody"); protocol.CodeOf(err) != protocol.CodeAuthForbidden {
		t.Fatalf("AgentCard of an unknown agent: %v", err)
	}
}
