package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rule is one package's row. Module packages are named relative to the
// module ("runtime/client"); other patterns are import paths, and a
// trailing "/..." covers a tree ("net/..." is net and everything under it).
type rule struct {
	// imports are the module packages it may import; any other is an error.
	imports []string
	// banned are packages its source (the files below) must not import.
	banned []string
	// never are packages that must not be among its dependencies at all,
	// however indirectly.
	never []string
	// clock: time comes in as an argument or from an injected clock, so
	// the source calls none of wallClock (time.Now, time.Sleep, ...).
	clock bool
	// noGo: no go statements; the caller owns every goroutine.
	noGo bool
	// files limits banned, clock and noGo to these files (nil: all).
	files []string
	// allow excuses one use, "file.go time.Sleep", and says why.
	allow map[string]string
	// planned: the package does not exist yet; its row is what it will
	// have to obey.
	planned bool
}

// wallClock are the time functions that read or wait on the real clock.
var wallClock = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// The packages a pure core must not import: I/O, randomness and, for the
// strictest, concurrency.
var (
	noIO      = []string{"os/...", "syscall", "io/ioutil", "net/...", "go.etcd.io/bbolt/...", "github.com/coder/websocket/..."}
	noRandom  = []string{"math/rand/...", "crypto/rand"}
	noThreads = []string{"sync/...", "runtime/...", "unsafe"}
	// Links neither storage nor a network stack, however indirectly.
	noStorage = []string{"go.etcd.io/bbolt/...", "github.com/coder/websocket/...", "net/http/...", "github.com/nats-io/..."}
)

func cat(lists ...[]string) []string { return slices.Concat(lists...) }

// rules is docs/design.md §2 as a table, one row per package of the module.
// Dependencies point down: nothing imports runtime/ or poc/ except cmd/
// (and poc imports runtime), and runtime never links authority-lite.
var rules = map[string]rule{
	// Wire types, strict JSON, canonical bytes, signatures, schemas. Pure
	// apart from key files (keys.go uses os): never a clock, a goroutine,
	// a socket or a store.
	"protocol": {
		banned:  []string{"net", "net/http/...", "os/exec", "syscall", "go.etcd.io/bbolt/...", "github.com/coder/websocket/..."},
		imports: []string{"internal/atomicfile"},
		never:   noStorage,
		clock:   true,
		noGo:    true,
	},
	"internal/clock": {},
	// Replacing a file durably (temp file, fsync, rename, fsync of the
	// directory): the one copy every store and key file uses.
	"internal/atomicfile": {imports: []string{}, never: noStorage},
	// Authenticating the authority's certificate: the wss client and
	// package remote share one description of it.
	"internal/tlstrust": {imports: []string{}, never: []string{mod + "queue", mod + "authority-lite/..."}},
	// Surviving a damaged bbolt file: guarded transactions, meta pages,
	// the check report both stores print.
	"internal/storecheck": {imports: []string{"protocol", "internal/atomicfile"}},
	"internal/deptest":    {},
	// The operator's HTTP endpoints: metrics, health, pprof; status sockets.
	"internal/ops": {},
	// The Group state machine (Decide and one Fold), which authority-lite
	// and queue both stand on: state, command and time in, events out;
	// the same on the authority and on every worker replaying.
	"group": {
		imports: []string{"protocol"},
		banned:  cat(noIO, noRandom),
		never:   noStorage,
		clock:   true,
		noGo:    true,
	},
	// Plan files: bytes in, a Plan or line-numbered problems out; the
	// caller reads the file and supplies the start time.
	"plan": {
		imports: []string{"protocol"},
		banned:  cat(noIO, noRandom),
		never:   noStorage,
		clock:   true,
		noGo:    true,
	},
	// Test fixtures for group and the services on it; imported by tests only.
	"group/grouptest": {imports: []string{"protocol"}},
	// Deterministic: the same inputs and clock readings give the same
	// decisions, so nothing that does I/O, draws random numbers or runs
	// concurrently. docs/design.md §2 lets it use protocol's types, but
	// protocol links os and net/url; the scheduler has its own.
	"scheduler": {
		banned: cat(noIO, noRandom, noThreads),
		never:  []string{"net/...", "os/exec", "go.etcd.io/bbolt/...", "github.com/coder/websocket/..."},
		clock:  true,
		noGo:   true,
	},
	"scheduler/simulate": {
		imports: []string{"scheduler"},
		banned:  cat(noIO, noRandom, noThreads),
		never:   []string{"net/...", "os/exec", "go.etcd.io/bbolt/...", "github.com/coder/websocket/..."},
		clock:   true,
		noGo:    true,
	},
	// The window, binding, authority check and risk rules are pure; only
	// the buffer and Prepare (rebase.go) touch bbolt. authority-lite runs
	// the same checks when it reconciles, hence its import of offline.
	"offline": {
		imports: []string{"protocol"},
		banned:  cat(noIO, noRandom, []string{"sync/..."}),
		clock:   true,
		noGo:    true,
		files:   []string{"window.go", "check.go", "binding.go", "risk.go"},
	},
	"checkpoint": {imports: []string{"protocol", "internal/clock", "internal/atomicfile"}, clock: true},
	"toolkeys":   {imports: []string{"protocol"}},
	"queue":      {imports: []string{"protocol", "internal/clock", "group", "internal/storecheck"}},
	"slots":      {imports: []string{"protocol", "checkpoint", "toolkeys", "internal/clock"}},
	// The service reads only its injected clock (the decision core has no
	// other time than its now argument).
	"authority-lite": {
		imports: []string{"protocol", "internal/clock", "offline", "authority-lite/wss", "group", "internal/storecheck", "internal/atomicfile", "authority-lite/logstore", "authority-lite/logstore/boltlog"},
		clock:   true,
		allow: map[string]string{
			"writer.go time.Sleep":    "backs off briefly when taking an ancestor's lock against the usual order; that wait decides nothing",
			"writer.go time.Now":      "times a log transaction for its latency metric; the time decides nothing",
			"writer.go time.Since":    "times a log transaction for its latency metric; the time decides nothing",
			"writer.go time.NewTimer": "bounds how long the group commit gathers requests; the wait decides nothing",
		},
	},
	"authority-lite/wss": {imports: []string{"protocol", "internal/atomicfile"}},
	// The authority's log behind one interface (logstore), its suite, and
	// its stores: the embedded bbolt file, the tree in memory and the
	// replicated JetStream stream that keeps one. They know bytes,
	// sequences and keys, not the protocol.
	"authority-lite/logstore":           {imports: []string{}, never: noStorage},
	"authority-lite/logstore/storetest": {imports: []string{"authority-lite/logstore"}, never: noStorage},
	"authority-lite/logstore/boltlog":   {imports: []string{"authority-lite/logstore"}},
	"authority-lite/logstore/memtree":   {imports: []string{"authority-lite/logstore"}, never: noStorage},
	"authority-lite/logstore/jslog":     {imports: []string{"authority-lite/logstore", "authority-lite/logstore/memtree"}},
	// NATS servers inside a test process, on loopback.
	"internal/natstest": {imports: []string{}},
	// The HTTPS routes beside the binding, on its listener; they speak the
	// binding's error form and event records.
	"authority-lite/httpapi": {imports: []string{"protocol", "authority-lite/wss"}},
	// Beside the authority, not in runtime: the worker must not link the
	// authority it talks to.
	"authority-lite/embed": {imports: []string{"authority-lite", "authority-lite/wss", "authority-lite/httpapi", "internal/clock", "protocol", "group"}},
	// The wss client knows the wire and the store, not the worker; its
	// timers come from Config.Clock so tests step them. group: the check
	// and state of a Group Snapshot it restores (group/snapshot.go).
	"runtime/client": {
		imports: []string{"protocol", "queue", "group", "internal/clock", "internal/tlstrust"},
		never:   []string{mod + "authority-lite/...", mod + "runtime", mod + "poc"},
		clock:   true,
		allow: map[string]string{
			"turn.go time.Now":        "times a turn's commit, the bound of a small turn's wait; the time decides nothing",
			"turn.go time.Since":      "times a turn's commit, the bound of a small turn's wait; the time decides nothing",
			"gather.go time.NewTimer": "bounds how long a small turn gathers; the wait decides nothing",
		},
	},
	// The worker's item lifecycle (item.Step): an item, an input and the
	// time in, the item and its effects out. No clock, store, connection,
	// slot or goroutine: the engine in runtime feeds it and carries out
	// what it decides.
	"runtime/item": {
		imports: []string{"protocol", "group", "scheduler"},
		banned:  cat(noIO, noRandom, noThreads),
		never: []string{"net", "net/http/...", "os/exec", "go.etcd.io/bbolt/...", "github.com/coder/websocket/...",
			mod + "runtime/client", mod + "queue", mod + "slots", mod + "authority-lite/..."},
		clock: true,
		noGo:  true,
	},
	"runtime": {
		imports: []string{"protocol", "internal/clock", "queue", "scheduler", "slots", "checkpoint", "toolkeys", "offline", "runtime/client", "runtime/item", "internal/atomicfile"},
		never:   []string{mod + "authority-lite/...", mod + "poc"},
	},
	// A plan's coordinator: it reaches the authority only through its
	// Authority interface (in process or over the wire), so it never
	// depends on either side's implementation.
	"coordinator": {
		imports: []string{"protocol", "internal/clock", "group", "plan"},
		never:   []string{mod + "authority-lite/...", mod + "runtime/...", mod + "poc", mod + "queue"},
		clock:   true,
	},
	// A Group Authority over the wire (wss and its HTTPS routes) for agents
	// and humans that keep no worker store: coordinators, owners, tools.
	// internal/tlstrust: the certificate pinning the worker's client uses;
	// coordinator: only for its SignedEvent type, which coordinator.Authority's
	// Events returns, so that remote.Authority implements that interface;
	// group: the Group Snapshot check it shares with the worker's store.
	"remote": {
		imports: []string{"protocol", "group", "internal/clock", "internal/tlstrust", "coordinator"},
		never:   []string{mod + "authority-lite/...", mod + "runtime", mod + "poc", mod + "queue"},
		clock:   true,
	},
	// The PoC's coordinators are package coordinator running its Missions
	// as plans.
	"poc": {imports: []string{"protocol", "internal/clock", "queue", "scheduler", "slots", "checkpoint", "toolkeys", "offline",
		"group", "authority-lite", "authority-lite/wss", "authority-lite/embed", "runtime", "runtime/client", "handlers/python", "plan", "coordinator",
		"internal/atomicfile", "review"}},
	// What a human reads before approving a Mission, and the prompt: the
	// Group's log folded with group.Fold, rendered as text. The caller reads
	// the log and the artifacts, so it links no store, no network and no
	// driver, and every terminal that asks (up, poc approve, mission
	// status) can share it.
	"review": {
		imports: []string{"protocol", "group"},
		banned:  cat(noIO, noRandom),
		never:   cat(noStorage, []string{mod + "poc", mod + "runtime/...", mod + "authority-lite/..."}),
		clock:   true,
		noGo:    true,
	},
	// The load generator behind `mwp-worker bench`: it runs the embedded
	// authority and real workers side by side, as the PoC does.
	"internal/bench": {
		imports: []string{"protocol", "group", "queue", "slots", "runtime", "authority-lite", "authority-lite/embed", "remote"},
		never:   []string{mod + "poc"},
	},
	// The run and up commands for Go programs embedding handlers
	// (workercmd.Main); cmd/mwp-worker's run and up are its commands. It
	// imports what they need (up: plans and their coordinator), and never
	// the PoC.
	"workercmd": {
		imports: []string{"protocol", "checkpoint", "slots", "offline", "runtime", "runtime/client", "internal/ops",
			"authority-lite", "authority-lite/embed", "authority-lite/wss", "remote", "plan", "coordinator", "group", "handlers/python", "internal/atomicfile", "review"},
		never: []string{mod + "poc"},
	},
	// The Python helper module, embedded for programs that install it.
	"handlers/python": {imports: []string{}, clock: true, noGo: true},
	// The embedding example of workercmd: a handler and Main, nothing else.
	"examples/go-handler": {imports: []string{"protocol", "slots", "workercmd"}},
	"cmd/mwp-worker":      {imports: []string{"..."}},
}

const mod = "github.com/missionweave/mwp-worker/"

// match reports whether import path p is covered by pattern pat.
func match(pat, p string) bool {
	if pat == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == tree || strings.HasPrefix(p, tree+"/")
	}
	return p == pat
}

func matchAny(pats []string, p string) (string, bool) {
	for _, pat := range pats {
		if match(pat, p) {
			return pat, true
		}
	}
	return "", false
}

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	IgnoredGoFiles []string // other platforms' files: ruled too
	Imports        []string
	Deps           []string
	Error          *struct{ Err string }
}

// listModule returns every package of the module, by relative path.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the import rules need the go command: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-e", "-json", mod+"...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, mod)
		if !ok {
			t.Fatalf("go list returned %s, outside the module", p.ImportPath)
		}
		pkgs[rel] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages: %v", len(pkgs), slices.Sorted(maps.Keys(pkgs)))
	}
	return pkgs
}

// TestImportRules checks every package of the module against its row.
func TestImportRules(t *testing.T) {
	pkgs := listModule(t)
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := rules[name]; !ok {
			t.Errorf("package %s has no row in internal/deptest's rules: decide what it may import (docs/design.md §2)", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		r := rules[name]
		p, ok := pkgs[name]
		switch {
		case !ok && r.planned:
			t.Logf("%s: planned, not yet in the module", name)
			continue
		case !ok:
			t.Errorf("rules name %s, which is not a package of the module (mark it planned if it is coming)", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkImports(t, name, r, p)
			checkSource(t, name, r, p)
		})
	}
}

// checkImports holds a package's module imports to its row and its whole
// dependency tree to its never list.
func checkImports(t *testing.T, name string, r rule, p pkg) {
	for _, imp := range p.Imports {
		rel, inModule := strings.CutPrefix(imp, mod)
		if !inModule {
			continue
		}
		if _, ok := matchAny(r.imports, rel); !ok {
			t.Errorf("%s imports %s, which its row does not allow (may import: %v)", name, rel, r.imports)
		}
	}
	for _, dep := range p.Deps {
		if pat, bad := matchAny(r.never, dep); bad {
			t.Errorf("%s depends on %s (never: %s)", name, dep, pat)
		}
	}
}

// checkSource parses the package's non-test files for banned imports,
// wall-clock calls and go statements.
func checkSource(t *testing.T, name string, r rule, p pkg) {
	if len(r.banned) == 0 && !r.clock && !r.noGo {
		return
	}
	files := slices.Concat(p.GoFiles, p.IgnoredGoFiles)
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	if r.files != nil {
		for _, f := range r.files {
			if !slices.Contains(files, f) {
				t.Errorf("%s: the row names %s, which the package does not have", name, f)
			}
		}
		files = r.files
	}
	used := map[string]bool{}
	for _, f := range files {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		timeName := ""
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if pat, bad := matchAny(r.banned, path); bad {
				t.Errorf("%s/%s imports %s (banned: %s)", name, f, path, pat)
			}
			if path == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		if r.clock && timeName == "." {
			t.Errorf("%s/%s dot-imports time, which hides its clock reads", name, f)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				if r.noGo {
					t.Errorf("%s: go statement at %s: the caller owns the goroutines", name, fset.Position(n.Pos()))
				}
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				if !r.clock || !ok || timeName == "" || id.Name != timeName || !slices.Contains(wallClock, n.Sel.Name) {
					return true
				}
				use := f + " time." + n.Sel.Name
				if _, ok := r.allow[use]; ok {
					used[use] = true
					return true
				}
				t.Errorf("%s: time.%s at %s: take the time as an argument or from the injected clock", name, n.Sel.Name, fset.Position(n.Pos()))
			}
			return true
		})
	}
	for use := range r.allow {
		if !used[use] {
			t.Errorf("%s: the row allows %q, which the source no longer does: drop the exception", name, use)
		}
	}
}

// TestRulesPointDown checks the table itself against docs/design.md §2, so a
// row cannot quietly allow what the design forbids.
func TestRulesPointDown(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		r := rules[name]
		for _, imp := range r.imports {
			if imp == "..." {
				if !strings.HasPrefix(name, "cmd/") {
					t.Errorf("%s may import anything: only cmd/ may", name)
				}
				continue
			}
			if _, ok := rules[imp]; !ok {
				t.Errorf("%s may import %s, which has no row", name, imp)
			}
			inRuntime := func(p string) bool { return match("runtime/...", p) }
			switch {
			case strings.HasPrefix(name, "cmd/"):
			case inRuntime(imp) && name != "poc" && name != "internal/bench" && name != "workercmd" && !inRuntime(name):
				t.Errorf("%s may import %s: nothing imports runtime/ but cmd/, poc, internal/bench and workercmd", name, imp)
			case imp == "poc":
				t.Errorf("%s may import poc: only cmd/ may", name)
			case inRuntime(name) && match("authority-lite/...", imp):
				t.Errorf("%s may import %s: runtime never imports authority-lite", name, imp)
			case name == "runtime/client" && imp == "runtime":
				t.Errorf("runtime/client may import runtime: the worker drives its client, not the other way round")
			}
		}
	}
}
