package slots

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// plainHost is a Host that cannot read artifacts.
type plainHost struct{ Host }

// fetchAssignment names two inputs, "spec" and "patch", stored in the
// host beside a third artifact that belongs to another item.
func fetchAssignment(h *fakeHost) (Assignment, map[string]string) {
	d := map[string]string{}
	for name, data := range map[string]string{"spec": "the spec", "patch": "the patch", "other": "another Mission's bytes"} {
		d[name] = protocol.Digest([]byte(data))
		h.artifacts[d[name]] = []byte(data)
	}
	a := assignment("grp-a", "wi-1", "l1", "fetch")
	a.Contract.Inputs = protocol.List[protocol.InputRef]{{Artifact: d["spec"], Name: "spec"}, {Artifact: d["patch"], Name: "patch"}}
	return a, d
}

// Work.Input and Work.FetchArtifact read only the item's own inputs,
// checked, bounded and under a live lease; every refusal has its code.
func TestWorkFetchArtifact(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxFetchBytes+1)
	cases := []struct {
		name string
		// fetch is called in the run; it returns the bytes read.
		fetch func(ctx context.Context, w *Work, d map[string]string) ([]byte, error)
		setup func(e *env, d map[string]string)
		want  string
		code  protocol.Code
		// reads is how many times the host was asked for bytes.
		reads int
	}{
		{name: "input by name", want: "the spec", reads: 1,
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				got, data, err := w.Input(ctx, "spec")
				if err == nil && got != d["spec"] {
					t.Errorf("digest %s, want %s", got, d["spec"])
				}
				return data, err
			}},
		{name: "input by digest", want: "the patch", reads: 1,
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["patch"])
			}},
		{name: "not an input: refused unread", code: protocol.CodeAuthForbidden,
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["other"])
			}},
		{name: "empty digest", code: protocol.CodeAuthForbidden,
			fetch: func(ctx context.Context, w *Work, _ map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, "")
			}},
		{name: "unknown input name", code: protocol.CodeInvalidCommand,
			fetch: func(ctx context.Context, w *Work, _ map[string]string) ([]byte, error) {
				_, data, err := w.Input(ctx, "other")
				return data, err
			}},
		{name: "bytes that do not hash to the digest", code: protocol.CodeInternalError, reads: 1,
			setup: func(e *env, _ map[string]string) {
				e.host.readArtifact = func(string) ([]byte, error) { return []byte("tampered"), nil }
			},
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["spec"])
			}},
		{name: "over the size limit", code: protocol.CodeInvalidCommand, reads: 1,
			setup: func(e *env, _ map[string]string) {
				e.host.readArtifact = func(string) ([]byte, error) { return big, nil }
			},
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["spec"])
			}},
		{name: "the store's refusal passes through", code: protocol.CodeInvalidCommand, reads: 1,
			setup: func(e *env, d map[string]string) { delete(e.host.artifacts, d["spec"]) },
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["spec"])
			}},
		{name: "credentials expired", code: protocol.CodeWorkLeaseExpired,
			setup: func(e *env, _ map[string]string) { e.clock.Advance(31 * time.Minute) },
			fetch: func(ctx context.Context, w *Work, d map[string]string) ([]byte, error) {
				return w.FetchArtifact(ctx, d["spec"])
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				got []byte
				err error
				d   map[string]string
			)
			e := newEnv(t, 1, handler("fetch", func(ctx context.Context, w *Work) (Result, error) {
				got, err = tc.fetch(ctx, w, d)
				return Result{}, nil
			}))
			var a Assignment
			a, d = fetchAssignment(e.host)
			if tc.setup != nil {
				tc.setup(e, d)
			}
			e.start(t, a)
			e.host.wait(t)
			if tc.code == "" {
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			} else if protocol.CodeOf(err) != tc.code {
				t.Fatalf("err %v (%s), want %s", err, protocol.CodeOf(err), tc.code)
			}
			reads := 0
			for _, c := range e.host.callLog() {
				if strings.Contains(c, " read ") {
					reads++
				}
			}
			if reads != tc.reads {
				t.Fatalf("the host was asked %d times, want %d", reads, tc.reads)
			}
		})
	}
}

// A Host without ArtifactReader answers every fetch with a refusal.
func TestWorkFetchWithoutReader(t *testing.T) {
	var err error
	e := newEnv(t, 1, handler("fetch", func(ctx context.Context, w *Work) (Result, error) {
		_, _, err = w.Input(ctx, "spec")
		return Result{}, nil
	}))
	e.pool.cfg.Host = plainHost{e.host}
	a, _ := fetchAssignment(e.host)
	e.start(t, a)
	e.host.wait(t)
	if protocol.CodeOf(err) != protocol.CodeInvalidCommand || !strings.Contains(err.Error(), "cannot read artifacts") {
		t.Fatalf("err %v", err)
	}
}

// The fetch request of mwp-slot/1: a program reads its inputs by name and
// by digest; a digest outside its contract and an unknown name get error
// replies, and the run goes on.
func TestExecFetch(t *testing.T) {
	script := `
import base64, json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
start = json.loads(sys.stdin.readline())
ask = json.loads(start["contract"]["notes"])["ask"]
seen = []
for i, q in enumerate(ask):
    q = dict(q, type="fetch", id="f%d" % i)
    send(q)
    r = json.loads(sys.stdin.readline())
    if r["type"] == "fetched":
        seen.append({"id": r["id"], "digest": r["digest"], "data": base64.b64decode(r["data"]).decode()})
    else:
        seen.append({"id": r["id"], "code": r["code"]})
send({"type": "artifact", "id": "out", "mediaType": "application/json",
      "data": base64.b64encode(json.dumps(seen).encode()).decode()})
sys.stdin.readline()
send({"type": "result"})
`
	e := newEnv(t, 1, Exec{Path: python(t), Args: []string{"-c", script}, Cap: protocol.Capability{ID: "fetch", Version: "1.0.0"}})
	a, d := fetchAssignment(e.host)
	ask, _ := json.Marshal([]map[string]string{{"name": "spec"}, {"digest": d["patch"]}, {"digest": d["other"]}, {"name": "nope"}})
	a.Contract.Notes = `{"ask":` + string(ask) + `}` // context carries only a Context Package
	e.start(t, a)
	o := e.host.wait(t)
	if o.Kind != Completed || len(o.Result.Artifacts) != 0 {
		t.Fatalf("outcome %v %q %v", o.Kind, o.Reason, o.Err)
	}
	var out []map[string]string
	for _, data := range e.host.artifacts {
		if bytes.HasPrefix(data, []byte("[")) {
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []map[string]string{
		{"id": "f0", "digest": d["spec"], "data": "the spec"},
		{"id": "f1", "digest": d["patch"], "data": "the patch"},
		{"id": "f2", "code": string(protocol.CodeAuthForbidden)},
		{"id": "f3", "code": string(protocol.CodeInvalidCommand)},
	}
	g, _ := json.Marshal(out)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("the program saw\n%s\nwant\n%s", g, w)
	}
}
