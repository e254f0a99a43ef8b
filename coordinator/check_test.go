package coordinator

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ExecCheck runs the argv in a directory holding the outputs, reports the
// exit status and a bounded stdout, and stops a check past its timeout.
func TestExecCheck(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	files := map[string][]byte{"report.json": []byte(`{"failed":0}`)}
	for _, tc := range []struct {
		name    string
		argv    []string
		timeout time.Duration
		exit    int
		stdout  string
		err     string
	}{
		{name: "reads its outputs", argv: []string{"sh", "-c", "cat report.json"}, stdout: `{"failed":0}`},
		{name: "exit status", argv: []string{"sh", "-c", "exit 3"}, exit: 3},
		{name: "bounded output", argv: []string{"sh", "-c", "printf 0123456789abcdef"}, stdout: "0123456789"},
		{name: "timeout", argv: []string{"sh", "-c", "sleep 30"}, timeout: 50 * time.Millisecond, err: "timed out"},
		{name: "no such program", argv: []string{"no-such-program-here"}, err: "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.timeout
			if d == 0 {
				d = 30 * time.Second
			}
			res, err := ExecCheck(d, 10)(context.Background(), CheckRun{Name: tc.name, Command: tc.argv, Files: files})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || res.ExitCode != tc.exit || res.Stdout != tc.stdout[:min(len(tc.stdout), 10)] {
				t.Fatalf("= %+v, %v; want exit %d stdout %q", res, err, tc.exit, tc.stdout)
			}
		})
	}
	if _, err := ExecCheck(time.Second, 10)(context.Background(), CheckRun{Command: []string{"true"}, Files: map[string][]byte{"../x": nil}}); err == nil {
		t.Fatal("an output file name with a path was written")
	}
}
