package wss

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// ListenOptions choose between wss (the default) and plain ws.
type ListenOptions struct {
	// Certificate is served over TLS 1.3; required unless InsecureLoopback.
	Certificate *tls.Certificate
	// InsecureLoopback serves plain ws, for tests only. It is refused for
	// any address that is not a loopback one (127.0.0.0/8, ::1, localhost).
	InsecureLoopback bool
}

// Listen opens addr for Server.Serve: a TLS 1.3 listener, or a plain TCP
// one when InsecureLoopback is set and addr is a loopback address.
func Listen(ctx context.Context, addr string, o ListenOptions) (net.Listener, error) {
	if o.InsecureLoopback {
		if err := checkLoopback(addr); err != nil {
			return nil, err
		}
	} else if o.Certificate == nil {
		return nil, errors.New("wss: a certificate is required (plain ws needs the insecure-loopback option)")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wss: %w", err)
	}
	if o.InsecureLoopback {
		// "localhost" could resolve anywhere; judge the bound address too.
		if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
			_ = ln.Close()
			return nil, fmt.Errorf("wss: insecure listener bound to %s, which is not loopback", ln.Addr())
		}
		return ln, nil
	}
	return &tlsListener{Listener: ln, config: TLSConfig(*o.Certificate)}, nil
}

// tlsListener is tls.NewListener's behaviour with the TCP listener kept
// reachable, so Serve can count connections below TLS.
type tlsListener struct {
	net.Listener
	config *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.config), nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("wss: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("wss: plain ws is allowed only on a loopback address, not %q", addr)
}
