package main

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/slots"
	"github.com/missionweave/mwp-worker/workercmd"
)

// The packaging examples of examples/systemd and examples/docker
// (docs/operations.md, "Running it as a service").

// unitFile is a parsed systemd unit: "Section.Key" to its values, in order.
type unitFile map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unitFile{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u unitFile) last(key string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func unitDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

// execStartFlags checks that the command and every --flag of ExecStart
// exist in the CLI, and returns the flags' values.
func execStartFlags(t *testing.T, execStart string) (path []string, flags map[string]string) {
	t.Helper()
	words := strings.Fields(execStart)
	if len(words) == 0 || words[0] != "/usr/local/bin/mwp-worker" {
		t.Fatalf("ExecStart %q does not run /usr/local/bin/mwp-worker", execStart)
	}
	c := newApp()
	words = words[1:]
	for len(words) > 0 && !strings.HasPrefix(words[0], "-") && !strings.HasPrefix(words[0], "$") {
		if c = c.Command(words[0]); c == nil {
			t.Fatalf("ExecStart %q: no command %q", execStart, words[0])
		}
		path, words = append(path, words[0]), words[1:]
	}
	flags = map[string]string{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "$") {
			continue // extra flags from the environment file
		}
		name, ok := strings.CutPrefix(w, "--")
		if !ok {
			t.Fatalf("ExecStart %q: stray word %q", execStart, w)
		}
		var f cli.Flag
		for _, cf := range c.Flags {
			if slices.Contains(cf.Names(), name) {
				f = cf
			}
		}
		if f == nil {
			t.Fatalf("ExecStart %q: %s has no flag --%s", execStart, strings.Join(path, " "), name)
		}
		if _, isBool := f.(*cli.BoolFlag); !isBool && i+1 < len(words) {
			i++
			flags[name] = words[i]
		}
	}
	return path, flags
}

// runtimeDrainTimeout is runtime.WorkerConfig.DrainTimeout's default, what
// run uses when it has no --drain-timeout flag.
const runtimeDrainTimeout = 30 * time.Second

// unitDrainTimeout reads Environment=MWP_DRAIN_TIMEOUT=D of the unit.
func unitDrainTimeout(t *testing.T, u unitFile) time.Duration {
	t.Helper()
	for _, v := range u["Service.Environment"] {
		for _, kv := range strings.Fields(v) {
			if d, ok := strings.CutPrefix(strings.Trim(kv, `"`), "MWP_DRAIN_TIMEOUT="); ok {
				return unitDuration(t, d)
			}
		}
	}
	t.Fatalf("the unit sets no MWP_DRAIN_TIMEOUT: its TimeoutStopSec cannot be checked against the drain")
	return 0
}

// runDrainFlag is run's --drain-timeout, when it has one: its default and
// the variables it reads.
func runDrainFlag() (def time.Duration, env []string, ok bool) {
	for _, f := range runCommand().Flags {
		if d, isDur := f.(*cli.DurationFlag); isDur && d.Name == "drain-timeout" {
			return d.Value, d.GetEnvVars(), true
		}
	}
	return 0, nil, false
}

func TestSystemdUnits(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "systemd")
	for _, tc := range []struct {
		file    string
		command string
	}{
		{"mwp-authority.service", "authority serve"},
		{"mwp-worker.service", "run"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			u := readUnit(t, filepath.Join(dir, tc.file))
			for key, want := range map[string]string{
				"Service.ProtectSystem":            "strict",
				"Service.NoNewPrivileges":          "yes",
				"Service.PrivateTmp":               "yes",
				"Service.Restart":                  "on-failure",
				"Service.RestartPreventExitStatus": "2",
				"Service.CapabilityBoundingSet":    "",
			} {
				if got, ok := u[key]; !ok || u.last(key) != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
			for _, key := range []string{"Service.StateDirectory", "Service.RestartSec", "Service.TimeoutStopSec", "Install.WantedBy"} {
				if u.last(key) == "" {
					t.Errorf("no %s", key)
				}
			}
			if u.last("Service.User") == "" && u.last("Service.DynamicUser") != "yes" {
				t.Errorf("runs as root: neither User= nor DynamicUser=yes")
			}
			path, flags := execStartFlags(t, u.last("Service.ExecStart"))
			if strings.Join(path, " ") != tc.command {
				t.Fatalf("ExecStart runs %q, want %q", path, tc.command)
			}
			if want := "%S/" + u.last("Service.StateDirectory"); flags["data"] != want {
				t.Errorf("--data %q, want the state directory %s", flags["data"], want)
			}
			// A failed write to the authority's log exits 75: the unit
			// must restart it (docs/operations.md).
			for _, key := range []string{"Service.RestartPreventExitStatus", "Service.SuccessExitStatus"} {
				for _, v := range u[key] {
					if slices.Contains(strings.Fields(v), "75") {
						t.Errorf("%s=%s: status 75 would not be restarted", key, v)
					}
				}
			}
			stop := unitDuration(t, u.last("Service.TimeoutStopSec"))
			if tc.command == "run" {
				drain := unitDrainTimeout(t, u)
				if def, env, ok := runDrainFlag(); ok {
					if drain != def || !slices.Contains(env, "MWP_DRAIN_TIMEOUT") {
						t.Errorf("MWP_DRAIN_TIMEOUT=%v in the unit; run --drain-timeout defaults to %v and reads %v", drain, def, env)
					}
				} else if drain != runtimeDrainTimeout {
					t.Errorf("MWP_DRAIN_TIMEOUT=%v in the unit; runtime's default is %v", drain, runtimeDrainTimeout)
				}
				if stop < drain+10*time.Second {
					t.Errorf("TimeoutStopSec %v leaves less than 10s beyond the drain (%v) before SIGKILL", stop, drain)
				}
				if u.last("Service.KillMode") != "mixed" {
					t.Errorf("KillMode %q: handler processes would get SIGTERM from systemd during the drain", u.last("Service.KillMode"))
				}
				if u.last("Service.LoadCredential") == "" || !strings.HasPrefix(flags["key"], "%d/") {
					t.Errorf("the agent key should come from LoadCredential (--key %q)", flags["key"])
				}
			}
		})
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the units were checked here, not by systemd")
	}
	// verify wants ExecStart's program to exist: point it at a fresh build.
	bin := buildBinary(t)
	tmp := t.TempDir()
	var units []string
	for _, name := range []string{"mwp-authority.service", "mwp-worker.service"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/mwp-worker", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The users the units run as are the ones the sysusers.d file creates.
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skip("systemd-sysusers not installed: mwp-worker.sysusers not checked")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Abs(filepath.Join(dir, "mwp-worker.sysusers"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(sysusers, "--dry-run", "--root="+root, conf).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-sysusers --dry-run: %v\n%s", err, out)
	}
	for _, name := range []string{"mwp-authority.service", "mwp-worker.service"} {
		u := readUnit(t, filepath.Join(dir, name))
		if user := u.last("Service.User"); !strings.Contains(string(out), "Creating user '"+user+"'") {
			t.Errorf("%s runs as %q, which mwp-worker.sysusers does not create:\n%s", name, user, out)
		}
	}
}

// The Dockerfile's promises that can be read without docker; the build
// itself runs only where a docker daemon answers.
func TestDockerfile(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "docker", "Dockerfile")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string       // instructions per stage
	args := map[string]string{} // global ARG defaults, for FROM ${NAME}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if arg, ok := strings.CutPrefix(line, "ARG "); ok && len(stages) == 0 {
			name, def, _ := strings.Cut(arg, "=")
			args[name] = def
		}
		if from, ok := strings.CutPrefix(line, "FROM "); ok {
			stages = append(stages, nil)
			line = "FROM " + os.Expand(from, func(name string) string { return args[name] })
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := strings.Join(stages[0], "\n"), stages[len(stages)-1]
	if !strings.Contains(build, ".ci/release-build") {
		t.Errorf("the build stage does not use .ci/release-build (CGO_ENABLED=0, -trimpath, version stamp)")
	}
	has := func(prefix string) string {
		for _, l := range final {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	if from := final[0]; !strings.Contains(from, "distroless/static") && from != "FROM scratch" {
		// The default base; the python3 variant (a build argument) is distroless too.
		t.Errorf("runtime stage %q: want a base without a shell", from)
	}
	if run := has("RUN "); run != "" {
		t.Errorf("runtime stage runs %q: it has no shell", run)
	}
	if user := has("USER "); user == "" || strings.HasPrefix(user, "USER root") || strings.HasPrefix(user, "USER 0") {
		t.Errorf("runtime stage user %q: want a non-root user", user)
	}
	if has("VOLUME /data") == "" {
		t.Errorf("no VOLUME /data")
	}

	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker not installed: the image was not built")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("docker daemon not reachable, the image was not built: %v: %s", err, lastLine(string(out)))
	}
	if testing.Short() {
		t.Skip("-short: the image was not built")
	}
	tag := "mwp-worker-test:" + time.Now().UTC().Format("20060102150405")
	const rev = "0123456789abcdef0123456789abcdef01234567"
	dockerBuild := exec.Command(docker, "build", "-f", path, "--build-arg", "VERSION=v0.0.0-image-test", "--build-arg", "REVISION="+rev, "-t", tag, filepath.Join("..", ".."))
	if out, err := dockerBuild.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })
	out, err := exec.Command(docker, "run", "--rm", tag, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "mwp-worker version v0.0.0-image-test (revision "+rev) {
		t.Fatalf("docker run --version: %v: %s", err, out)
	}
	if out, err := exec.Command(docker, "run", "--rm", "--entrypoint", "/bin/sh", tag, "-c", "true").CombinedOutput(); err == nil {
		t.Errorf("the image has a shell: %s", out)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// envFileVars reads a systemd EnvironmentFile's assignments, commented-out
// examples included, as systemd would read them uncommented: NAME to the
// value with one pair of enclosing double quotes removed.
func envFileVars(t *testing.T, path string) (vars map[string]string, text string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "#"), "=")
		if !ok || !strings.HasPrefix(name, "MWP_") || strings.ContainsAny(name, " \t") {
			continue
		}
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(value[1 : len(value)-1])
		}
		vars[name] = value
	}
	return vars, string(b)
}

// The env files beside the units name only variables their command reads
// (a flag's variable, or one the unit's ExecStart expands), carry the log
// format and the metrics address, describe enrolment with `authority
// enroll` (no restart), and worker.env's MWP_HANDLER_EXEC, a handler with
// arguments, is read as one --handler-exec: the program and its
// arguments, split as a shell would.
func TestSystemdEnvFiles(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "systemd")
	for _, tc := range []struct {
		env, unit string
		command   []string
	}{
		{"authority.env", "mwp-authority.service", []string{"authority", "serve"}},
		{"worker.env", "mwp-worker.service", []string{"run"}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			vars, text := envFileVars(t, filepath.Join(dir, tc.env))
			c := newApp()
			for _, name := range tc.command {
				c = c.Command(name)
			}
			read := map[string]bool{}
			for _, f := range c.Flags {
				if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
					for _, v := range ev.GetEnvVars() {
						read[v] = true
					}
				}
			}
			execStart := readUnit(t, filepath.Join(dir, tc.unit)).last("Service.ExecStart")
			for name := range vars {
				if !read[name] && !strings.Contains(execStart, "$"+name) {
					t.Errorf("%s sets %s, which `mwp-worker %s` does not read", tc.env, name, strings.Join(tc.command, " "))
				}
			}
			for _, want := range []string{"MWP_LOG_LEVEL", "MWP_LOG_FORMAT", "MWP_METRICS_LISTEN"} {
				if _, ok := vars[want]; !ok {
					t.Errorf("%s does not carry %s", tc.env, want)
				}
			}
			if tc.env == "authority.env" && (!strings.Contains(text, "authority enroll") || strings.Contains(text, "clock skew")) {
				t.Errorf("%s does not describe enrolment with `authority enroll` while it runs:\n%s", tc.env, text)
			}
		})
	}

	vars, _ := envFileVars(t, filepath.Join(dir, "worker.env"))
	t.Setenv("MWP_HANDLER_EXEC", vars["MWP_HANDLER_EXEC"])
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the worker keeps mwpslot.py
	var hs []slots.Handler
	cmd := &cli.Command{Name: "run", DisableSliceFlagSeparator: true, Flags: []cli.Flag{workercmd.HandlerExecFlag(), workercmd.HandlerClarifyFlag()},
		Action: func(_ context.Context, cmd *cli.Command) (err error) {
			hs, err = workercmd.HandlersOf(cmd, nil, "w1", time.Second, slog.New(slog.DiscardHandler))
			return err
		}}
	if err := cmd.Run(context.Background(), []string{"run"}); err != nil {
		t.Fatalf("MWP_HANDLER_EXEC=%q: %v", vars["MWP_HANDLER_EXEC"], err)
	}
	e, ok := hs[0].(slots.Exec)
	if len(hs) != 1 || !ok || e.Cap.ID != "build.go" || e.Path != "/usr/bin/python3" ||
		!slices.Equal(e.Args, []string{"/usr/local/lib/mwp/handlers/build.py", "--jobs", "2"}) {
		t.Fatalf("MWP_HANDLER_EXEC=%q read as %+v", vars["MWP_HANDLER_EXEC"], hs)
	}
}
