package offline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// The decision logic (window, binding, authority check, risk) is pure
// (DESIGN.md §2): no clock reads, I/O, randomness or goroutines. Only
// buffer.go and rebase.go (Prepare) touch bbolt.
func TestPurity(t *testing.T) {
	t.Parallel()
	forbidden := map[string]bool{
		"os": true, "os/exec": true, "syscall": true, "net": true, "net/http": true, "go.etcd.io/bbolt": true,
		"math/rand": true, "math/rand/v2": true, "crypto/rand": true, "sync": true, "sync/atomic": true,
		"github.com/missionweave/mwp-worker/internal/clock": true,
	}
	clockCalls := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	for _, name := range []string{"window.go", "check.go", "binding.go", "risk.go"} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		timeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbidden[path] {
				t.Errorf("%s imports %s", name, path)
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
				if id, ok := n.X.(*ast.Ident); ok && id.Name == timeName && clockCalls[n.Sel.Name] {
					t.Errorf("%s: time.%s at %s; time must come in as an argument", name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}
