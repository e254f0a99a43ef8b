package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"
)

// Request is one operator request on a status socket: an op name and
// its JSON body. A connection that sends none (or op "status") gets the
// status document.
type Request struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

// Handlers answer the ops of a status socket beyond "status"; the value
// returned is sent back as one JSON document.
type Handlers map[string]func(ctx context.Context, body json.RawMessage) any

// maxRequest bounds one request line (an Agent Card fits many times).
const maxRequest = 2 << 20

// ServeStatus answers every connection to the Unix socket at path with one
// JSON document, status() at that moment, until ctx ends; the socket is
// private (0600) to the process's user. A socket file left by a process
// that is gone is replaced: the caller holds the data directory's lock.
func ServeStatus(ctx context.Context, path string, status func() any, log *slog.Logger) error {
	return ServeSocket(ctx, path, status, nil, log)
}

// ServeSocket is ServeStatus with more ops: a connection first sends one
// Request line, answered by its handler (an unknown op gets
// {"error": ...}); only the operator, the socket's owner, can connect.
func ServeSocket(ctx context.Context, path string, status func() any, handlers Handlers, log *slog.Logger) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ops: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("ops: status socket (paths must stay under ~100 bytes): %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				var answer any
				req, err := readRequest(conn)
				switch h := handlers[req.Op]; {
				case err != nil:
					answer = map[string]string{"error": err.Error()}
				case req.Op == "" || req.Op == "status":
					answer = status()
				case h == nil:
					answer = map[string]string{"error": "unknown op " + req.Op}
				default:
					// A handler may take longer than a status read.
					conn.SetDeadline(time.Now().Add(time.Minute))
					answer = h(ctx, req.Body)
				}
				if err := json.NewEncoder(conn).Encode(answer); err != nil {
					log.Debug("status socket", "err", err)
				}
			}()
		}
	}()
	return nil
}

// readRequest reads the one request line; a client that sends nothing and
// closes its side asks for the status.
func readRequest(conn net.Conn) (Request, error) {
	var req Request
	line, err := bufio.NewReader(io.LimitReader(conn, maxRequest)).ReadBytes('\n')
	if len(bytes.TrimSpace(line)) == 0 && (err == nil || errors.Is(err, io.EOF)) {
		return req, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return req, err
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("request: %v", err)
	}
	return req, nil
}

// AskStatus reads the document ServeStatus serves at path into v.
func AskStatus(path string, timeout time.Duration, v any) error {
	return Ask(path, timeout, Request{Op: "status"}, v)
}

// Ask sends req to the socket at path and reads the answer into v.
func Ask(path string, timeout time.Duration, req Request, v any) error {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout + 5*time.Second))
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(conn, 64<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
