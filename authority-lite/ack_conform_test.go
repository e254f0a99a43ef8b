package authoritylite

import (
	"fmt"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/wss"
	"github.com/missionweave/mwp-worker/protocol"
)

// replayAll subscribes c to grp-a from the start and reads events until
// the one at last, returning their sequences in order; an ERROR frame
// fails the test at once.
func replayAll(t *testing.T, c *wireConn, last uint64) []uint64 {
	t.Helper()
	if err := c.send(`{"type":"SUBSCRIBE","frameId":"s1","groups":[{"groupId":"grp-a","afterSequence":0}]}`); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for range 10000 {
		f, err := c.read()
		if err != nil {
			t.Fatalf("replay: %v after %v", err, seqs)
		}
		if e, ok := f.(*protocol.ErrorFrame); ok {
			// CURSOR_TOO_OLD here means history was deleted.
			t.Fatalf("replay from the start refused after %v: %v", seqs, e.Error)
		}
		if e, ok := f.(*protocol.EventFrame); ok {
			seqs = append(seqs, e.Event.Seq())
			if e.Event.Seq() >= last {
				return seqs
			}
		}
	}
	t.Fatal("replay never reached the end")
	return nil
}

// ackedAt counts the cursors of grp-a ACKed at seq.
func ackedAt(s *Service, seq uint64) int {
	n := 0
	for key, at := range s.AckedCursors() {
		if key[1] == "grp-a" && at == seq {
			n++
		}
	}
	return n
}

// An ACK lets the server clean up delivery, never authoritative history
// (spec 16): once every member has ACKed the whole log over the wire, the
// log still holds every event from the first, and a subscriber from the
// start is replayed all of them.
func TestAckNeverDeletesHistory(t *testing.T) {
	k := newSvc(t)
	k.toActive("wi-1")
	last := k.s.LastSequence("grp-a")
	url := serveLoopback(t, k.s, wss.Options{IdleTimeout: time.Hour, PingInterval: time.Hour})

	for i, id := range []string{"w1", "w2", "coord"} {
		p := k.w[id]
		if id == "coord" {
			p = k.coord
		}
		c, f := helloAs(t, url, p, k.s.org.agent(id).SessionEpoch)
		if _, ok := f.(*protocol.Hello); !ok {
			t.Fatalf("HELLO of %s: %#v", id, f)
		}
		if got := replayAll(t, c, last); uint64(len(got)) != last {
			t.Fatalf("%s replayed %d events before any ACK, want %d", id, len(got), last)
		}
		if err := c.send(fmt.Sprintf(`{"type":"ACK","frameId":"a1","cursors":[{"groupId":"grp-a","sequence":%d}]}`, last)); err != nil {
			t.Fatal(err)
		}
		// Wait for the server to have taken the ACK (bounded).
		deadline := time.Now().Add(10 * time.Second)
		for ackedAt(k.s, last) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("the ACK of %s was never recorded: %v", id, k.s.AckedCursors())
			}
			time.Sleep(time.Millisecond)
		}
		if evs := checkLog(t, k.s, "grp-a"); uint64(len(evs)) != last || evs[0].Seq() != 1 {
			t.Fatalf("after %s ACKed %d, the log holds %d events from %d", id, last, len(evs), evs[0].Seq())
		}
		_ = c.ws.CloseNow()
	}
	if n := len(k.s.AckedCursors()); n != 3 {
		t.Fatalf("%d cursors recorded, want one per member: %v", n, k.s.AckedCursors())
	}

	evs := checkLog(t, k.s, "grp-a")
	if uint64(len(evs)) != last || evs[0].Seq() != 1 || evs[len(evs)-1].Seq() != last {
		t.Fatalf("after every member ACKed %d, the log holds %d events", last, len(evs))
	}
	c, _ := helloAs(t, url, k.w["w1"], k.s.org.agent("w1").SessionEpoch)
	got := replayAll(t, c, last)
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("replay after the ACKs: %v, want 1..%d", got, last)
		}
	}
}
