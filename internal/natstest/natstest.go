// Package natstest runs NATS servers with JetStream inside a test process,
// on loopback, each in its own temporary directory, stopped when the test
// ends; every write is synced before its ack (sync_interval: always), as
// a deployment must run them.
package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ready bounds how long servers may take to start and elect leaders.
const ready = 20 * time.Second

func options(t testing.TB, name string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
		// Tests make small streams; keep the servers from reserving more.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	}
}

func start(t testing.TB, o *server.Options) *server.Server {
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(ready) {
		t.Fatalf("nats server %s not ready within %s", o.ServerName, ready)
	}
	return s
}

// Server starts one server and returns its client URL.
func Server(t testing.TB) string {
	return start(t, options(t, "n1")).ClientURL()
}

// Cluster starts n clustered servers and returns their client URLs,
// comma-separated (what nats.Connect takes), once they have elected a
// JetStream meta leader that sees them all.
func Cluster(t testing.TB, n int) string {
	return StartCluster(t, n).URLs
}

// Servers is a running cluster.
type Servers struct {
	// URLs are the client URLs, comma-separated.
	URLs    string
	servers []*server.Server
}

// StopLeader stops the server leading a stream of the default account
// and returns its name ("" when no server leads it).
func (c *Servers) StopLeader(stream string) string {
	for _, s := range c.servers {
		if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			s.Shutdown()
			s.WaitForShutdown()
			return s.Name()
		}
	}
	return ""
}

// StartCluster is Cluster that also returns the servers, to stop one.
func StartCluster(t testing.TB, n int) *Servers {
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	var servers []*server.Server
	var urls []string
	for i, p := range ports {
		o := options(t, fmt.Sprintf("n%d", i+1))
		o.Cluster = server.ClusterOpts{Name: "mwp", Host: "127.0.0.1", Port: p}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(ready) {
			t.Fatalf("nats server %s not ready within %s", s.Name(), ready)
		}
		urls = append(urls, s.ClientURL())
	}
	// Ready once a meta leader sees every peer online (a stream placed
	// before would find "no suitable peers") and every server is current.
	deadline := time.Now().Add(ready)
	for {
		peers, current := 0, 0
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				peers = len(s.JetStreamClusterPeers())
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if peers == n && current == n {
			return &Servers{URLs: strings.Join(urls, ","), servers: servers}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no JetStream meta leader among %d servers within %s", n, ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
