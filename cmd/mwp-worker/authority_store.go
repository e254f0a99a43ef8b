package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/jslog"
)

// storeFlags choose where `authority serve` keeps its log: DIR/authority.db
// by default, or a NATS JetStream stream (docs/operations.md, "The log in
// NATS JetStream").
func storeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", Usage: "keep the log in a NATS JetStream stream instead of DIR/authority.db: `nats://HOST:PORT[,nats://HOST:PORT…]` (tls:// for TLS; user:password@ in a URL as nats.go takes it); the NATS servers must sync every write (sync_interval: always); one authority serves a stream at a time (docs/operations.md)", Sources: cli.EnvVars("MWP_AUTHORITY_STORE")},
		&cli.IntFlag{Name: "store-replicas", Usage: "NATS servers that keep the stream (it is created so, or its configuration brought to it)", Value: 3, Sources: cli.EnvVars("MWP_AUTHORITY_STORE_REPLICAS")},
		&cli.StringFlag{Name: "store-stream", Usage: "the stream's name; its subjects are its name in lower case followed by .k.>, .b.> and .s.>", Value: "MWPLOG", Sources: cli.EnvVars("MWP_AUTHORITY_STORE_STREAM")},
		&cli.StringFlag{Name: "store-creds", Usage: "a NATS credentials `FILE` (user JWT and seed)", Sources: cli.EnvVars("MWP_AUTHORITY_STORE_CREDS")},
		&cli.StringFlag{Name: "store-ca", Usage: "a PEM `FILE` of the CAs the NATS servers' certificates chain to", Sources: cli.EnvVars("MWP_AUTHORITY_STORE_CA")},
		&cli.StringFlag{Name: "store-cert", Usage: "a PEM client certificate `FILE` for the NATS servers (with --store-key)", Sources: cli.EnvVars("MWP_AUTHORITY_STORE_CERT")},
		&cli.StringFlag{Name: "store-key", Usage: "the PEM private key `FILE` of --store-cert", Sources: cli.EnvVars("MWP_AUTHORITY_STORE_KEY")},
	}
}

// openStore opens the log --store names, nil when it names none; the
// string names it in the authority's messages.
func openStore(ctx context.Context, cmd *cli.Command) (logstore.Tree, string, error) {
	urls := cmd.String("store")
	if urls == "" {
		return nil, "", nil
	}
	for _, u := range strings.Split(urls, ",") {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			return nil, "", fmt.Errorf("--store %s: want nats://HOST:PORT or tls://HOST:PORT", u)
		}
	}
	if cmd.Int("store-replicas") < 1 {
		return nil, "", fmt.Errorf("--store-replicas must be at least 1")
	}
	opts := []nats.Option{nats.Name("mwp-worker authority"), nats.MaxReconnects(-1)}
	if f := cmd.String("store-creds"); f != "" {
		opts = append(opts, nats.UserCredentials(f))
	}
	if f := cmd.String("store-ca"); f != "" {
		opts = append(opts, nats.RootCAs(f))
	}
	cert, key := cmd.String("store-cert"), cmd.String("store-key")
	if (cert == "") != (key == "") {
		return nil, "", fmt.Errorf("--store-cert and --store-key go together")
	}
	if cert != "" {
		opts = append(opts, nats.ClientCert(cert, key))
	}
	stream := cmd.String("store-stream")
	tr, err := jslog.OpenTree(ctx, jslog.Config{URLs: urls, Stream: stream, Subjects: strings.ToLower(stream),
		Replicas: int(cmd.Int("store-replicas")), Options: opts, Timeout: 5 * time.Second})
	if err != nil {
		return nil, "", err
	}
	return tr, fmt.Sprintf("stream %s on %s", stream, redact(urls)), nil
}

// redact drops passwords from NATS URLs before they are printed.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			scheme, _, _ := strings.Cut(u, "://")
			parts[i] = scheme + "://…@" + u[at+1:]
		}
	}
	return strings.Join(parts, ",")
}
