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
