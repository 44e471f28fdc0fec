// Command local serves the waiting room's HTTP API on this machine: the same
// handler as the Lambda functions, behind net/http, on an embedded in-memory
// store (or a DynamoDB API when DYNAMODB_ENDPOINT is set). For development
// and load tests; production runs on Lambda.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:3000", "listen address (SAM's local port by default)")
	demo := fs.String("demo-program", "demo", "program created at start (empty: none)")
	demoRate := fs.Float64("demo-rate", 1, "admission rate of the demo program, people per second")
	createTable := fs.Bool("create-table", false, "with DYNAMODB_ENDPOINT: create the table if it does not exist")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: local [flags]\n\nServes the waiting-room API on an embedded store.\nEnvironment: ADMIN_TOKEN (admin bearer secret; generated and printed when unset), %s, %s, %s (use a DynamoDB API instead of memory), %s.\n\n",
			config.EnvPollTiers, config.EnvProgramCacheTTL, config.EnvDynamoEndpoint, config.EnvTableName)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.FromEnv(getenv, false)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	store, err := openStore(ctx, cfg, *createTable, log)
	if err != nil {
		return err
	}
	svc := cfg.NewService(store)

	secret := getenv("ADMIN_TOKEN")
	if secret == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secret = hex.EncodeToString(b[:])
		fmt.Fprintf(stdout, "ADMIN_TOKEN not set; generated admin token: %s\n", secret)
	}
	if *demo != "" {
		rate, paused := *demoRate, false
		if _, _, err := svc.PutProgram(ctx, *demo, queue.Settings{AdmissionRatePerSecond: &rate, Paused: &paused}); err != nil {
			return fmt.Errorf("create demo program: %w", err)
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           httpapi.New(svc, httpapi.WithAdminSecret(secret), httpapi.WithLogger(log)),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	if m, ok := store.(*memstore.Store); ok {
		go sweep(ctx, m, time.Minute)
	}
	fmt.Fprintf(stdout, "waiting room listening on http://%s (default polling policy %s, tiers %s", ln.Addr(), cfg.PolicyName, cfg.Tiers.Spec())
	if *demo != "" {
		fmt.Fprintf(stdout, ", demo program %q at %g/s", *demo, *demoRate)
	}
	fmt.Fprintln(stdout, ")")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

// sweep deletes ended tokens as DynamoDB TTL would.
func sweep(ctx context.Context, m *memstore.Store, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Sweep(now)
		}
	}
}
