package scheduler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The scheduler is pure (DESIGN.md §2): no clock reads, I/O, randomness or
// goroutines, so the same inputs and clock always give the same decisions.
// Like tailscale's deptest, this fails the build of anything that breaks it.

var forbiddenImports = map[string]string{
	"os": "I/O", "os/exec": "I/O", "io/ioutil": "I/O", "syscall": "I/O", "net": "I/O",
	"net/http": "I/O", "go.etcd.io/bbolt": "I/O", "github.com/coder/websocket": "I/O",
	"math/rand": "nondeterminism", "math/rand/v2": "nondeterminism", "crypto/rand": "nondeterminism",
	"sync": "concurrency", "sync/atomic": "concurrency", "runtime": "concurrency", "unsafe": "unsafe",
	"github.com/missionweave/mwp-worker/internal/clock": "reads the wall clock",
}

var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

func TestPurity(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "simulate"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			checkPureFile(t, name)
		}
	}
}

func checkPureFile(t *testing.T, name string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	timeName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := forbiddenImports[path]; bad || strings.HasPrefix(path, "net/") {
			t.Errorf("%s imports %s (%s)", name, path, why)
		}
		if path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: goroutine at %s", name, fset.Position(n.Pos()))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && forbiddenTimeCalls[n.Sel.Name] {
				t.Errorf("%s: time.%s at %s; time must come in as an argument", name, n.Sel.Name, fset.Position(n.Pos()))
			}
		}
		return true
	})
}

// Transitively too: nothing the scheduler links may bring I/O or a clock.
func TestPurityDeps(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".", "./simulate").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "net", strings.HasPrefix(dep, "net/"), dep == "os/exec",
			dep == "go.etcd.io/bbolt", dep == "github.com/coder/websocket",
			dep == "github.com/missionweave/mwp-worker/internal/clock":
			t.Errorf("scheduler depends on %s", dep)
		}
	}
}
