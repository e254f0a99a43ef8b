package authoritylite

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

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

// BenchmarkServiceStores measures accepted commands/s through the whole
// pipeline (message.post, one Group, group commit) with the log in
// authority.db and in a stream of one NATS server and of three
// (replicas 3), the same commands in each, in one run: cmds/s of each
// and the streams' ratios to bbolt. Nothing here asserts a time.
func BenchmarkServiceStores(b *testing.B) {
	one, three := natstest.Server(b), natstest.Cluster(b, 3)
	runs := 0
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			rate := map[string]float64{}
			for _, st := range []struct {
				name     string
				url      string
				replicas int
			}{{"bolt", "", 0}, {"nats1", one, 1}, {"nats3", three, 3}} {
				var tree logstore.Tree
				if st.url != "" {
					runs++
					tree = natsTree(st.url, fmt.Sprintf("bench%d", runs), st.replicas)(b)
				}
				cmds, s, cleanup := benchCommandsOn(b, 1, b.N, tree)
				start := time.Now()
				runParallel(clients, (b.N+clients-1)/clients, func(c, i int) {
					if idx := i*clients + c; idx < b.N {
						if _, err := s.Submit(context.Background(), "", cmds[0][idx]); err != nil {
							b.Error(err)
						}
					}
				})
				rate[st.name] = float64(b.N) / time.Since(start).Seconds()
				cleanup()
				b.ReportMetric(rate[st.name], st.name+"_cmds/s")
			}
			b.ReportMetric(rate["nats1"]/rate["bolt"], "x_bolt_nats1")
			b.ReportMetric(rate["nats3"]/rate["bolt"], "x_bolt_nats3")
		})
	}
}
