package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// A write to the authority's log that fails (here: the file may not grow,
// as on a full disk) stops `authority serve` with exit status 75 instead of
// leaving it up and refusing everything; restarted, it has every command it
// acknowledged and none of the one that failed.
func TestAuthorityExitsAfterFailedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit to cap the log's size")
	}
	f := newAuthorityFixture(t)
	bin, hk, data, serveArgs := f.bin, f.hk, f.data, f.serveArgs
	stop := func(p *proc) {
		t.Helper()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(10 * time.Second):
			t.Fatal("authority did not stop")
		}
	}

	// A first start with the coordinator's session, to learn how big the
	// log is before the writes this test makes fail.
	first := startProc(t, bin, serveArgs...)
	co := f.connect(first)
	co.stop()
	stop(first)
	fi, err := os.Stat(filepath.Join(data, "authority.db"))
	if err != nil {
		t.Fatal(err)
	}

	capped := startProc(t, prlimit, append([]string{fmt.Sprintf("--fsize=%d", fi.Size())}, append([]string{bin}, serveArgs...)...)...)
	co = f.connect(capped)
	alice := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	var acked [][]byte
	var acks []*protocol.Receipt
	var refused []byte
	for i := 0; refused == nil; i++ {
		if i == 200 {
			t.Fatalf("200 Missions fit in %d bytes: the cap did not hold\n%s", fi.Size(), capped.logs())
		}
		_, raw, err := protocol.BuildCommand(alice, hk, protocol.CmdMissionCreate, protocol.Envelope{GroupID: fmt.Sprintf("grp-%03d", i)},
			&protocol.CreateMissionPayload{MissionID: fmt.Sprintf("mis-%03d", i), Title: "fill", Objective: strings.Repeat("o", 200), PriorityClass: protocol.PriorityNormal}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := co.c.Send(ctx, raw)
		cancel()
		switch code := protocol.CodeOf(err); {
		case err == nil:
			acked, acks = append(acked, raw), append(acks, r)
		case code == protocol.CodeInternalError:
			refused = raw
		case code == protocol.CodeRateLimited:
			i--
		default:
			t.Fatalf("mission.create %d: %v", i, err)
		}
	}
	co.stop()
	select {
	case err := <-capped.done:
		capped.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailedWrite {
			t.Fatalf("exit %v, want status %d\n%s", err, exitFailedWrite, capped.logs())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the authority kept running after a failed write\n%s", capped.logs())
	}
	if !strings.Contains(capped.logs(), "a write to the authority's log failed") {
		t.Fatalf("no line saying why it exited:\n%s", capped.logs())
	}

	// Restarted with room: each acknowledged command is there (its retry
	// gets the same receipt), the failed one is not (its retry is new).
	again := startProc(t, bin, serveArgs...)
	co = f.connect(again)
	defer co.stop()
	for i, raw := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := co.c.Send(ctx, raw)
		cancel()
		if err != nil || len(r.Events) == 0 || r.Events[0].EventID != acks[i].Events[0].EventID {
			t.Fatalf("acknowledged command %d after the restart: %v, %+v (first receipt %+v)", i, err, r, acks[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := co.c.Send(ctx, refused); err != nil {
		t.Fatalf("the command that failed, sent again after the restart: %v", err)
	}
	t.Logf("%d commands acknowledged before the failed write, all kept", len(acked))
}
