package ops

import (
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

// ServeStatus answers every connection to the Unix socket at path with one
// JSON document, status() at that moment, until ctx ends; the socket is
// private (0600) to the process's user. A socket file left by a process
// that is gone is replaced: the caller holds the data directory's lock.
func ServeStatus(ctx context.Context, path string, status func() any, log *slog.Logger) error {
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
				if err := json.NewEncoder(conn).Encode(status()); err != nil {
					log.Debug("status socket", "err", err)
				}
			}()
		}
	}()
	return nil
}

// AskStatus reads the document ServeStatus serves at path into v.
func AskStatus(path string, timeout time.Duration, v any) error {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout + 5*time.Second))
	raw, err := io.ReadAll(io.LimitReader(conn, 64<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
