package slots

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if va.context != string(contextFor("grp-a", "mis-grp-a", "wi-1")) || vb.context != string(contextFor("grp-b", "mis-grp-b", "wi-1")) {
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

// TestCitedEvents: a run reads the events its own package cites, through
// the host, from where it asks; without a package, or without a host
// that gives events, it is refused; the host's membership refusal reaches
// the handler unchanged.
func TestCitedEvents(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Assignment)
		from  uint64
		limit int
		seqs  string
		code  protocol.Code
	}{
		{name: "first page", limit: 3, seqs: "1,2,3"},
		{name: "from a sequence", from: 8, seqs: "8,9"},
		{name: "past the cited range", from: 10, seqs: ""},
		{name: "bounded by the host's page", seqs: "1,2,3,4"},
		{name: "no package", edit: func(a *Assignment) { a.Context = nil }, code: protocol.CodeInvalidCommand},
		{name: "no host events", edit: func(a *Assignment) { a.CitedEvents = nil }, code: protocol.CodeMembershipRequired},
		{name: "membership ended", edit: func(a *Assignment) { a.CitedEvents = fakeEvents("grp-none", 4) }, code: protocol.CodeMembershipRequired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			a := assignment("grp-a", "wi-1", "l1", "h")
			if tc.edit != nil {
				tc.edit(&a)
			}
			var got []json.RawMessage
			var err error
			runWith(t, e, a, func(ctx context.Context, w *Work) (Result, error) {
				got, err = w.CitedEvents(ctx, tc.from, tc.limit)
				return Result{}, nil
			})
			if tc.code != "" {
				if protocol.CodeOf(err) != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var seqs []string
			for _, raw := range got {
				var ev struct {
					GroupID  string `json:"groupId"`
					Sequence uint64 `json:"sequence"`
				}
				if json.Unmarshal(raw, &ev) != nil || ev.GroupID != "grp-a" {
					t.Fatalf("event %s", raw)
				}
				seqs = append(seqs, strconv.FormatUint(ev.Sequence, 10))
			}
			if s := strings.Join(seqs, ","); s != tc.seqs {
				t.Fatalf("sequences %q, want %q", s, tc.seqs)
			}
		})
	}
}
