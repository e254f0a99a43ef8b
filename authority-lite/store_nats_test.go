package authoritylite

import (
	"context"
	"flag"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/jslog"
	"github.com/missionweave/mwp-worker/internal/natstest"
)

// natsTree opens, on every call, the log in stream name of the NATS
// servers at url.
func natsTree(url, name string, replicas int) func(testing.TB) logstore.Tree {
	return func(t testing.TB) logstore.Tree {
		t.Helper()
		tr, err := jslog.OpenTree(context.Background(), jslog.Config{URLs: url, Stream: "LOG_" + name, Subjects: "log_" + name, Replicas: replicas})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
}

// TestServicePropertiesOnNATS is TestServiceProperties with the log in a
// JetStream stream of one NATS server: closed and reopened, or crashed
// (the connection dropped before anything else) and reopened on what the
// stream holds.
func TestServicePropertiesOnNATS(t *testing.T) {
	// A quarter of the runs on bbolt: each starts a stream, and the
	// bbolt runs explore the same decisions.
	checks := flag.Lookup("rapid.checks").Value
	was := checks.String()
	if was == "100" {
		_ = checks.Set("25")
		t.Cleanup(func() { _ = checks.Set(was) })
	}
	url := natstest.Server(t)
	serviceProperties(t, func(run string) func(testing.TB) logstore.Tree { return natsTree(url, run, 1) })
}
