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
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/demosite"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/metrics/prom"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/waitpage"
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
	demoCrowd := fs.Int("demo-crowd", 300, "people put in the demo program's line at start, ahead of whoever opens its page")
	var st storeFlags
	fs.StringVar(&st.dynamo, "dynamo", "", "start a local DynamoDB API and use it: moto (moto_server, behind a proxy that serialises its requests) or dynalite")
	fs.BoolVar(&st.createTable, "create-table", false, "with "+config.EnvDynamoEndpoint+": create the table if it does not exist")
	fs.StringVar(&st.partitionLimits, "partition-limits", "", "with a DynamoDB API: throttle each partition key as DynamoDB does, scale=F (AWS's 1,000 WCU and 3,000 RCU a second times F, e.g. scale=0.1) or write=W,read=R; its counts are at "+partitionStatsPath)
	maxConns := fs.Int("max-conns", 1000, "most connections open at once; at the bound the longest idle keep-alive is closed")
	readTimeout := fs.Duration("read-timeout", 10*time.Second, "longest time to read a request, body included (the write timeout is 10 s more)")
	idleTimeout := fs.Duration("idle-timeout", 30*time.Second, "how long an idle keep-alive connection stays open")
	passKey := fs.String("pass-key", "", "PEM file of the P-256 key that signs admission passes (default $"+config.EnvPassKeyFile+"; neither: a key generated at start)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: local [flags]

Serves the waiting-room API: on an in-memory store, or on a DynamoDB API
(-dynamo, or DYNAMODB_ENDPOINT; table %s unless TABLE_NAME says otherwise).
Admission passes are signed with -pass-key, PASS_KEY_FILE, PASS_KMS_KEY_ID
or a key generated at start, their JWKS at /.well-known/jwks.json; a demo
protected site checks them at /demo-site/{programId}. Shuffled openings
are seeded by SHUFFLE_KMS_KEY_ID or an RSA key generated at start.

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
	if *demoCrowd < 0 || *demoCrowd > 100_000 {
		return errors.New("-demo-crowd must be between 0 and 100000")
	}
	cfg, err := config.FromEnv(getenv, false)
	if err != nil {
		return err
	}
	log := app.Logger(cfg, stderr)
	if *passKey != "" {
		if cfg.Pass.KMSKeyID != "" {
			return fmt.Errorf("-pass-key and %s: choose one", config.EnvPassKMSKeyID)
		}
		cfg.Pass.KeyFile = *passKey
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close() // if run fails before serving
	base := baseURL(ln.Addr())
	passes, err := app.NewIssuer(ctx, cfg.Pass, base)
	if err != nil {
		return fmt.Errorf("admission passes: %w", err)
	}
	shuffle, err := app.NewShuffleKey(ctx, cfg)
	if err != nil {
		return fmt.Errorf("shuffle key: %w", err)
	}
	a, where, model, closeStore, err := openStore(ctx, cfg, st, log, app.WithPasses(passes), app.WithShuffleKey(shuffle))
	if err != nil {
		return err
	}
	defer closeStore()
	demoSite, err := demosite.New(demosite.Config{API: base, Issuer: passes.Issuer(), Programs: a.Service})
	if err != nil {
		return err
	}

	secret := getenv(EnvAdminToken)
	if secret == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secret = hex.EncodeToString(b[:])
		fmt.Fprintf(stdout, "%s not set; generated admin token: %s\n", EnvAdminToken, secret)
	}
	if *demo != "" {
		rate, paused := *demoRate, false
		profile := map[string]string{"targetUrl": demosite.URL(base, *demo)}
		maps.Copy(profile, demoProfile)
		if _, _, err := a.Service.PutProgram(ctx, *demo, queue.Settings{AdmissionRatePerSecond: &rate, Paused: &paused, Profile: profile}); err != nil {
			return fmt.Errorf("create demo program: %w", err)
		}
		for range *demoCrowd {
			if _, _, err := a.Service.Enter(ctx, *demo, queue.Entry{}); err != nil {
				return fmt.Errorf("demo program's crowd: %w", err)
			}
		}
	}

	conns := newConnLimit(*maxConns)
	// The partition model's statistics sit outside the metered API: they
	// answer 404 without -partition-limits.
	handler := withPartitionStats(withDemoSite(withMetrics(a, secret), demoSite), model)
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
		fmt.Fprintf(stdout, "; demo program %q at %g/s, %d people in line", *demo, *demoRate, *demoCrowd)
	}
	fmt.Fprintln(stdout, ")")
	fmt.Fprintf(stdout, "admission passes: iss %s, %s; keys at %s/.well-known/jwks.json\n", passes.Issuer(), passKeySource(cfg.Pass), base)
	if *demo != "" {
		fmt.Fprintf(stdout, "demo site: %s (targetUrl of %q)\n", demosite.URL(base, *demo), *demo)
		fmt.Fprintf(stdout, "waiting-room page of the demo program: %s%s%s\n", base, waitpage.PathPrefix, *demo)
	}
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

// demoProfile is what the demo program's waiting-room page shows.
var demoProfile = map[string]string{
	"displayName": "Demo concert · 데모 콘서트",
	"message":     "This is the local demo of the waiting room. Keep this page open: it shows your place and takes you in when it is your turn.",
}

// withMetrics is a's API recording into a Prometheus registry, with
// GET /metrics serving it; scrapes are not themselves counted. Not a
// ServeMux: one would redirect the non-canonical paths the API answers 404.
func withMetrics(a *app.App, secret string) http.Handler {
	sink := prom.New()
	a.Metrics = sink
	scrape, api := sink.Handler(), a.LocalHandler(secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && r.Method == http.MethodGet {
			scrape.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// withDemoSite serves /demo-site/… with site and everything else with
// api, untouched (no ServeMux in front: the API answers unclean paths
// itself).
func withDemoSite(api, site http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, demosite.Prefix) {
			site.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// baseURL is the local API's base URL on addr: http, the listening port,
// and a loopback host when the server listens on every interface. It is
// the passes' default iss, never taken from a request's Host header,
// which any client can write.
func baseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// passKeySource says which key signs the passes, for the start-up line.
func passKeySource(p config.Pass) string {
	switch {
	case p.KMSKeyID != "":
		return "KMS key " + p.KMSKeyID
	case p.KeyFile != "":
		return "key " + p.KeyFile
	}
	return "a key generated at start (passes die with the server; -pass-key keeps them)"
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
