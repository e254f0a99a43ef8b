package ops

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// One socket answers the status (asked, or by a client that sends
// nothing) and its handlers' ops; an unknown op is an error answer.
func TestServeSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "ops") // a short path: Unix socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := Handlers{"echo": func(_ context.Context, body json.RawMessage) any { return map[string]string{"got": string(body)} }}
	if err := ServeSocket(ctx, path, func() any { return map[string]string{"state": "ok"} }, h, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	var got map[string]string
	if err := AskStatus(path, time.Second, &got); err != nil || got["state"] != "ok" {
		t.Fatalf("status: %v %v", got, err)
	}
	got = nil
	if err := Ask(path, time.Second, Request{Op: "echo", Body: json.RawMessage(`{"a":1}`)}, &got); err != nil || got["got"] != `{"a":1}` {
		t.Fatalf("echo: %v %v", got, err)
	}
	got = nil
	if err := Ask(path, time.Second, Request{Op: "nope"}, &got); err != nil || got["error"] != "unknown op nope" {
		t.Fatalf("unknown op: %v %v", got, err)
	}
	// A client that sends nothing and closes its side gets the status.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.UnixConn).CloseWrite()
	got = nil
	if err := json.NewDecoder(conn).Decode(&got); err != nil || got["state"] != "ok" {
		t.Fatalf("silent client: %v %v", got, err)
	}
}

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"op":"status"}` + "\n"))
	f.Add([]byte(`{"op":"enroll","body":{"registration":{}}}` + "\n"))
	f.Add([]byte(""))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c1, c2 := net.Pipe()
		go func() {
			c2.Write(b)
			c2.Close()
		}()
		_, _ = readRequest(c1)
		c1.Close()
	})
}
