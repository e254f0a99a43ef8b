package workercmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/offline"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/runtime"
)

func parseTuning(t *testing.T, env map[string]string, args ...string) (runtime.WorkerConfig, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var cfg runtime.WorkerConfig
	var perr error
	cmd := &cli.Command{Name: "run", DisableSliceFlagSeparator: true, Flags: tuningFlags(), Action: func(_ context.Context, cmd *cli.Command) error {
		tu, err := tuningFrom(cmd)
		if err != nil {
			perr = err
			return nil
		}
		tu.apply(&cfg)
		return nil
	}}
	if err := cmd.Run(context.Background(), append([]string{"run"}, args...)); err != nil {
		t.Fatal(err)
	}
	return cfg, perr
}

func TestTuningFlags(t *testing.T) {
	cfg, err := parseTuning(t, nil)
	if err != nil || cfg.DrainTimeout != 30*time.Second || cfg.QueueDepth != 4 || cfg.OfflineGrace != offline.DefaultGrace ||
		cfg.OfflineLimits.MaxCommands != offline.DefaultMaxCommands || len(cfg.GroupWeights) != 0 || cfg.Classification != protocol.ClassInternal ||
		cfg.ForgetGrace != runtime.DefaultForgetGrace {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	if cfg, err := parseTuning(t, map[string]string{"MWP_FORGET_GRACE": "0s"}); err != nil || cfg.ForgetGrace >= 0 {
		t.Fatalf("--forget-grace 0 (never): %v %v", cfg.ForgetGrace, err)
	}
	if cfg, err := parseTuning(t, nil, "--forget-grace", "1h"); err != nil || cfg.ForgetGrace != time.Hour {
		t.Fatalf("--forget-grace 1h: %v %v", cfg.ForgetGrace, err)
	}
	cfg, err = parseTuning(t, map[string]string{"MWP_GROUP_QUOTAS": "grp-a=1,grp-b=2"},
		"--drain-timeout", "90s", "--group-weight", "grp-a=4", "--group-weight", "grp-b=2,grp-c=1", "--queue-depth", "8",
		"--offline-grace", "5m", "--offline-buffer-commands", "100", "--preempt-timeout", "10s", "--estimate", "3m", "--artifact-classification", "confidential", "--extension", "urn:example:ext:gpu")
	if err != nil || cfg.DrainTimeout != 90*time.Second || cfg.GroupWeights["grp-a"] != 4 || cfg.GroupWeights["grp-c"] != 1 ||
		cfg.GroupQuotas["grp-b"] != 2 || cfg.QueueDepth != 8 || cfg.OfflineGrace != 5*time.Minute || cfg.OfflineLimits.MaxCommands != 100 ||
		cfg.PreemptTimeout != 10*time.Second || cfg.Estimate != 3*time.Minute || cfg.Classification != protocol.ClassConfidential || len(cfg.Extensions) != 1 {
		t.Fatalf("set: %+v %v", cfg, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--group-weight", "grp-a"}, "want GROUP=N"},
		{[]string{"--group-weight", "grp-a=0"}, "want GROUP=N"},
		{[]string{"--group-quota", "grp-a=1,grp-a=2"}, "given twice"},
		{[]string{"--drain-timeout", "0s"}, "positive duration"},
		{[]string{"--offline-grace", "1h"}, "at most"},
		{[]string{"--forget-grace", "-1s"}, "0 for never"},
		{[]string{"--queue-depth", "0"}, "positive number"},
		{[]string{"--artifact-classification", "secret"}, "want public, internal"},
	} {
		if _, err := parseTuning(t, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// --cost and --limit (and MWP_COSTS, MWP_LIMITS) reach admission as
// WorkerConfig.Costs and Limits, in all six dimensions.
func TestCostAndLimitFlags(t *testing.T) {
	cfg, err := parseTuning(t, nil,
		"--cost", "code.review:tokens=20000,code.review:money=0.25", "--cost", "code.implement:toolCalls=12",
		"--cost", "code.implement:computeSeconds=1.5", "--cost", "code.implement:sideEffects=1", "--limit", "tokens=100000,money=5", "--limit", "toolCalls=50,computeSeconds=60,sideEffects=3,wallClockSeconds=3600")
	if err != nil {
		t.Fatal(err)
	}
	got := func(b protocol.Budgets) string { s, _ := protocol.Marshal(b); return string(s) }
	want := map[string]string{
		"code.review":    `{"money":0.25,"tokens":20000}`,
		"code.implement": `{"computeSeconds":1.5,"sideEffects":1,"toolCalls":12}`,
	}
	if len(cfg.Costs) != len(want) {
		t.Errorf("Costs = %v", cfg.Costs)
	}
	for c, w := range want {
		if got(cfg.Costs[c]) != w {
			t.Errorf("Costs[%s] = %s, want %s", c, got(cfg.Costs[c]), w)
		}
	}
	if w := `{"computeSeconds":60,"money":5,"sideEffects":3,"tokens":100000,"toolCalls":50,"wallClockSeconds":3600}`; got(cfg.Limits) != w {
		t.Errorf("Limits = %s, want %s", got(cfg.Limits), w)
	}
	if cfg, err := parseTuning(t, nil); err != nil || len(cfg.Costs) != 0 || got(cfg.Limits) != `{}` {
		t.Errorf("defaults: %v %s %v", cfg.Costs, got(cfg.Limits), err)
	}
	cfg, err = parseTuning(t, map[string]string{"MWP_COSTS": "c:tokens=7", "MWP_LIMITS": "money=5,wallClockSeconds=3600"})
	if err != nil || got(cfg.Costs["c"]) != `{"tokens":7}` || got(cfg.Limits) != `{"money":5,"wallClockSeconds":3600}` {
		t.Errorf("from the environment: %v %s %v", cfg.Costs, got(cfg.Limits), err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cost", "code.review=3"}, "want CAP:DIM=N"},
		{[]string{"--cost", "code.review:colour=3"}, `unknown dimension "colour"`},
		{[]string{"--cost", "c:tokens=1.5"}, "a whole number"},
		{[]string{"--cost", "c:money=-1"}, "a number >= 0"},
		{[]string{"--cost", "c:money=1,c:money=2"}, "money given twice"},
		{[]string{"--cost", "c:wallClockSeconds=9"}, "--estimate"},
		{[]string{"--limit", "tokens"}, "want DIM=N"},
		{[]string{"--limit", "money=NaN"}, "a number >= 0"},
	} {
		if _, err := parseTuning(t, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
