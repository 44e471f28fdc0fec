// Command local serves the waiting room's HTTP API on this machine: the same
// handlers as the Lambda functions, behind net/http, on an embedded
// in-memory store or a DynamoDB API. For development and load tests;
// production runs on Lambda.
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
	"strings"
	"syscall"
	"time"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
)

// EnvAdminToken is the admin bearer secret, read by the local server only.
const EnvAdminToken = "ADMIN_TOKEN"

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
	var st storeFlags
	fs.StringVar(&st.dynamo, "dynamo", "", "start a local DynamoDB API and use it: moto (moto_server, behind a proxy that serialises its requests) or dynalite")
	fs.BoolVar(&st.createTable, "create-table", false, "with "+config.EnvDynamoEndpoint+": create the table if it does not exist")
	fs.StringVar(&st.partitionLimits, "partition-limits", "", "with a DynamoDB API: throttle each partition key as DynamoDB does, scale=F (AWS's 1,000 WCU and 3,000 RCU a second times F, e.g. scale=0.1) or write=W,read=R; its counts are at "+partitionStatsPath)
	maxConns := fs.Int("max-conns", 1000, "most connections open at once; at the bound the longest idle keep-alive is closed")
	readTimeout := fs.Duration("read-timeout", 10*time.Second, "longest time to read a request, body included (the write timeout is 10 s more)")
	idleTimeout := fs.Duration("idle-timeout", 30*time.Second, "how long an idle keep-alive connection stays open")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: local [flags]

Serves the waiting-room API: on an in-memory store, or on a DynamoDB API
(-dynamo, or DYNAMODB_ENDPOINT; table %s unless TABLE_NAME says otherwise).

Environment:
  %s  admin bearer secret (generated and printed when unset)
  %s
  (see the README, Configuration)

Flags:
`, defaultLocalTable, EnvAdminToken, strings.Join(config.Variables, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *maxConns < 1 || *readTimeout <= 0 || *idleTimeout <= 0 {
		return errors.New("-max-conns, -read-timeout and -idle-timeout must be positive")
	}
	cfg, err := config.FromEnv(getenv, false)
	if err != nil {
		return err
	}
	log := app.Logger(cfg, stderr)

	a, where, model, closeStore, err := openStore(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	defer closeStore()

	secret := getenv(EnvAdminToken)
	if secret == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secret = hex.EncodeToString(b[:])
		fmt.Fprintf(stdout, "%s not set; generated admin token: %s\n", EnvAdminToken, secret)
	}
	if *demo != "" {
		rate, paused := *demoRate, false
		if _, _, err := a.Service.PutProgram(ctx, *demo, queue.Settings{AdmissionRatePerSecond: &rate, Paused: &paused}); err != nil {
			return fmt.Errorf("create demo program: %w", err)
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	conns := newConnLimit(*maxConns)
	handler := a.LocalHandler(secret)
	if model != nil {
		handler = withPartitionStats(handler, model)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(5*time.Second, *readTimeout),
		// A body that stops arriving fails to read after ReadTimeout, and
		// the handler still has time to answer it.
		ReadTimeout:    *readTimeout,
		WriteTimeout:   *readTimeout + 10*time.Second,
		IdleTimeout:    *idleTimeout,
		MaxHeaderBytes: 16 << 10,
		ConnState:      conns.track,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if m, ok := a.Store.(*memstore.Store); ok {
		go sweep(ctx, m, time.Minute)
	}
	fmt.Fprintf(stdout, "waiting room listening on http://%s (store: %s; default polling policy %s, tiers %s", ln.Addr(), where, cfg.PolicyName, cfg.Tiers.Spec())
	if *demo != "" {
		fmt.Fprintf(stdout, "; demo program %q at %g/s", *demo, *demoRate)
	}
	fmt.Fprintln(stdout, ")")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(conns.listener(ln)) }()
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
