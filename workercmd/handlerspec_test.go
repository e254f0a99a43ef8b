package workercmd

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/missionweave/mwp-worker/handlers/python"
	"github.com/missionweave/mwp-worker/slots"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil with err
		err  bool
	}{
		{"/bin/handler", []string{"/bin/handler"}, false},
		{"  python3   handler.py --steps 3 ", []string{"python3", "handler.py", "--steps", "3"}, false},
		{`python3 -c 'print("a, b")'`, []string{"python3", "-c", `print("a, b")`}, false},
		{`sh -c "echo \"hi\" \\ there"`, []string{"sh", "-c", `echo "hi" \ there`}, false},
		{`a\ b c`, []string{"a b", "c"}, false},
		{`x '' y`, []string{"x", "", "y"}, false},
		{`'unterminated`, nil, true},
		{`"unterminated`, nil, true},
		{`trailing\`, nil, true},
	} {
		got, err := splitCommand(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestHandlersFromArgs(t *testing.T) {
	hs, err := handlersFrom([]string{`lint@2.1.0=/bin/sh -c 'echo a,b'`}, nil, nil, demoHandler{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := hs[0].(slots.Exec)
	if !ok || e.Path != "/bin/sh" || !slices.Equal(e.Args, []string{"-c", "echo a,b"}) || e.Cap.ID != "lint" || e.Cap.Version != "2.1.0" || e.Logger == nil {
		t.Fatalf("handler %+v", hs[0])
	}
	if got := splitList([]string{"grp-a,grp-b", "grp-c\n"}, "\n,"); !slices.Equal(got, []string{"grp-a", "grp-b", "grp-c"}) {
		t.Fatalf("groups %q", got)
	}
	if got := splitList([]string{"a=/x 1,2\nb=/y"}, "\n"); !slices.Equal(got, []string{"a=/x 1,2", "b=/y"}) {
		t.Fatalf("handlers %q", got)
	}
}

// --handler-clarify makes the named capability's program a ClarifyingExec;
// a name no --handler-exec provides is refused.
func TestHandlersFromClarify(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	hs, err := handlersFrom([]string{"lint=/bin/sh", "fmt=/bin/sh"}, []string{"fmt"}, nil, demoHandler{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hs[0].(slots.Exec); !ok {
		t.Fatalf("lint is %T", hs[0])
	}
	if c, ok := hs[1].(slots.ClarifyingExec); !ok || c.Cap.ID != "fmt" || c.Path != "/bin/sh" {
		t.Fatalf("fmt is %T %+v", hs[1], hs[1])
	}
	if _, ok := hs[1].(slots.OfferClarifier); !ok {
		t.Fatal("a ClarifyingExec is not an OfferClarifier")
	}
	for _, tc := range []struct {
		specs, clarify []string
	}{
		{[]string{"lint=/bin/sh"}, []string{"fmt"}},
		{nil, []string{"fmt"}},
	} {
		_, err := handlersFrom(tc.specs, tc.clarify, nil, demoHandler{}, log)
		if err == nil || err.Error() != "--handler-clarify fmt: no --handler-exec provides it" {
			t.Errorf("%q %q: err %v", tc.specs, tc.clarify, err)
		}
	}
}

// Every --handler-exec program can `import mwpslot` (PYTHONPATH names a
// directory holding this build's module) and writes no bytecode beside
// its scripts.
func TestHandlerExecGetsThePythonHelper(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	script := filepath.Join(t.TempDir(), "h.py")
	if err := os.WriteFile(script, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	hs, err := handlersFrom([]string{"x.run=" + script}, nil, nil, demoHandler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := hs[0].(slots.Exec).Env
	if env["PYTHONDONTWRITEBYTECODE"] != "1" {
		t.Errorf("PYTHONDONTWRITEBYTECODE = %q", env["PYTHONDONTWRITEBYTECODE"])
	}
	got, err := os.ReadFile(filepath.Join(env["PYTHONPATH"], python.ModuleFile))
	if err != nil || !bytes.Equal(got, python.Module) {
		t.Fatalf("PYTHONPATH %q holds no mwpslot.py of this build: %v", env["PYTHONPATH"], err)
	}
	// A second worker finds it in place.
	again, err := handlerEnv()
	if err != nil || again["PYTHONPATH"] != env["PYTHONPATH"] {
		t.Errorf("second handlerEnv = %v, %v", again, err)
	}
}
