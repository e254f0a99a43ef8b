package slots

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/missionweave/mwp-worker/checkpoint"
	"github.com/missionweave/mwp-worker/protocol"
)

// seen is what one handler could observe through its Work.
type seen struct {
	context, token, goal, resume, workdir, key string
	resumed                                    bool
	foreignFile                                error
	usage                                      protocol.Usage
}

// Two Missions' handlers run at the same time, with the same WorkItem id
// in different Groups: each sees only its own context package,
// credentials, contract and checkpoint, gets its own keys and budget
// counters, and cannot reach the other's working directory through the
// API; tampering with what it got changes nothing for the other.
func TestIsolation(t *testing.T) {
	var (
		mu      sync.Mutex
		views   = map[string]*seen{}
		arrived sync.WaitGroup
		both    = make(chan struct{})
	)
	arrived.Add(2)
	h := handler("h", func(ctx context.Context, w *Work) (Result, error) {
		s := w.Slot()
		v := &seen{context: string(w.Context()), goal: w.Contract().Goal, workdir: w.Workdir()}
		c, _ := w.Credentials()
		v.token = c.Token
		st, ok := w.Resume()
		v.resume, v.resumed = string(st), ok
		// Scribble over the copies it was handed.
		ctxCopy := w.Context()
		for i := range ctxCopy {
			ctxCopy[i] = 'X'
		}
		k := w.Contract()
		k.AllowedTools[0] = "rm-rf"
		os.WriteFile(filepath.Join(w.Workdir(), "secret"), []byte(s.GroupID), 0o600)
		w.Checkpoint(ctx, []byte("state of "+s.GroupID), checkpoint.Meta{})
		w.ToolCall(ctx, readGit, func(_ context.Context, key string) ([]byte, error) {
			v.key = key
			return nil, nil
		})

		// Both are running now: look again.
		arrived.Done()
		<-both
		if string(w.Context()) != v.context || w.Contract().AllowedTools[0] != "git" {
			t.Errorf("%s: its copies changed under it", s.GroupID)
		}
		mu.Lock()
		views[s.GroupID] = v
		mu.Unlock()
		return Result{}, nil
	})
	e := newEnv(t, 2, h)
	// Group b already has a checkpoint for its wi-1; group a has none.
	if _, err := e.store.Save(checkpoint.Key{GroupID: "grp-b", WorkItemID: "wi-1", OwnershipEpoch: 1}, t0, checkpoint.Meta{}, []byte("b's earlier state")); err != nil {
		t.Fatal(err)
	}
	a, b := assignment("grp-a", "wi-1", "lease-a", "h"), assignment("grp-b", "wi-1", "lease-b", "h")
	a.Contract.Goal, b.Contract.Goal = "goal a", "goal b"
	e.start(t, a)
	e.start(t, b)
	arrived.Wait()
	close(both)
	outs := []Outcome{e.host.wait(t), e.host.wait(t)}

	va, vb := views["grp-a"], views["grp-b"]
	if va.context != `{"mission":"grp-a"}` || vb.context != `{"mission":"grp-b"}` {
		t.Fatalf("contexts %q %q", va.context, vb.context)
	}
	if va.token != "tok-lease-a" || vb.token != "tok-lease-b" || va.goal != "goal a" || vb.goal != "goal b" {
		t.Fatalf("credentials or contracts crossed: %+v %+v", va, vb)
	}
	if va.resumed || !vb.resumed || vb.resume != "b's earlier state" {
		t.Fatalf("resume: a %v %q, b %v %q", va.resumed, va.resume, vb.resumed, vb.resume)
	}
	if va.key == vb.key || va.key == "" {
		t.Fatalf("same operation id gave keys %q and %q", va.key, vb.key)
	}
	if va.workdir == vb.workdir {
		t.Fatal("shared working directory")
	}
	for _, o := range outs {
		if o.Kind != Completed || o.Usage.ToolCalls != 1 {
			t.Fatalf("%s: %v usage %+v", o.Slot.GroupID, o.Kind, o.Usage)
		}
	}
	for g, want := range map[string]string{"grp-a": "state of grp-a", "grp-b": "state of grp-b"} {
		c, err := e.store.Latest(g, "wi-1")
		if err != nil || string(c.State) != want {
			t.Fatalf("%s checkpoint %q %v", g, c.State, err)
		}
	}
	// Working directories are private and gone after the run.
	if _, err := os.Stat(va.workdir); !os.IsNotExist(err) {
		t.Fatalf("workdir left behind: %v", err)
	}
}
