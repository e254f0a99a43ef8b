package workercmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/missionweave/mwp-worker/handlers/python"
	"github.com/missionweave/mwp-worker/protocol"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// handlerEnv is what every --handler-exec program gets in its otherwise
// scrubbed environment: `import mwpslot` works (PYTHONPATH names a
// directory holding the helper module of this build), and Python leaves no
// __pycache__ beside the handler's scripts, so a checkout stays clean.
func handlerEnv() (map[string]string, error) {
	dir, err := helperDir()
	if err != nil {
		return nil, fmt.Errorf("the Python helper module: %w", err)
	}
	return map[string]string{"PYTHONPATH": dir, "PYTHONDONTWRITEBYTECODE": "1"}, nil
}

// helperDir returns a directory holding mwpslot.py, under the user's cache
// directory (else the system's temporary one) and named by the module's
// digest: every worker of one build shares it, another build gets its own,
// and a partly written copy is never seen (write, then rename).
func helperDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "mwp-worker", "python-"+protocol.Digest(python.Module)[len("sha256:"):][:16])
	want := filepath.Join(dir, python.ModuleFile)
	if got, err := os.ReadFile(want); err == nil && string(got) == string(python.Module) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, atomicfile.WriteFile(want, python.Module, 0o644)
}
