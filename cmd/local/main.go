// Command local serves the waiting room's HTTP API on this machine with the
// Lambda functions' handlers behind net/http, on an in-memory store or a
// DynamoDB API, for development and load tests.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/demosite"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
	"github.com/example/waitingroom/internal/tools/prom"
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

// localFlags are the local server's command-line flags.
type localFlags struct {
	addr                     string
	demo                     string
	demoRate                 float64
	demoCrowd                int
	store                    storeFlags
	maxConns                 int
	readTimeout, idleTimeout time.Duration
	passKey                  string
}

// parseLocalFlags parses args; it returns flag.ErrHelp for -h and an error
// for a flag out of range.
func parseLocalFlags(args []string, stderr io.Writer) (localFlags, error) {
	var f localFlags
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:3000", "listen address (SAM's local port by default)")
	fs.StringVar(&f.demo, "demo-program", "demo", "program created at start (empty: none)")
	fs.Float64Var(&f.demoRate, "demo-rate", 1, "admission rate of the demo program, people per second")
	fs.IntVar(&f.demoCrowd, "demo-crowd", 300, "people put in the demo program's line at start, ahead of whoever opens its page")
	fs.StringVar(&f.store.dynamo, "dynamo", "", "start a local DynamoDB API and use it: moto (moto_server, behind a proxy that serialises its requests) or dynalite")
	fs.BoolVar(&f.store.createTable, "create-table", false, "with "+config.EnvDynamoEndpoint+": create the table if it does not exist")
	fs.StringVar(&f.store.partitionLimits, "partition-limits", "", "with a DynamoDB API: throttle each partition key as DynamoDB does, scale=F (AWS's 1,000 WCU and 3,000 RCU a second times F, e.g. scale=0.1) or write=W,read=R; its counts are at "+partitionStatsPath)
	fs.IntVar(&f.maxConns, "max-conns", 1000, "most connections open at once; at the bound the longest idle keep-alive is closed")
	fs.DurationVar(&f.readTimeout, "read-timeout", 10*time.Second, "longest time to read a request, body included (the write timeout is 10 s more)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 30*time.Second, "how long an idle keep-alive connection stays open")
	fs.StringVar(&f.passKey, "pass-key", "", "PEM file of the P-256 key that signs admission passes (default $"+config.EnvPassKeyFile+"; neither: a keyring of this process, and passes end with it)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: local [flags]

Serves the waiting-room API: on an in-memory store, or on a DynamoDB API
(-dynamo, or DYNAMODB_ENDPOINT; table %s unless TABLE_NAME says otherwise).
Admission passes are signed with -pass-key, PASS_KEY_FILE, a keyring
wrapped by PASS_WRAP_KMS_KEY_ID, or a keyring of this process;
their JWKS is at /.well-known/jwks.json; a demo
protected site checks them at /demo-site/{programId}. Shuffled openings
are seeded by SHUFFLE_KMS_KEY_ID or an RSA key generated at start.

Environment:
  %s  admin bearer secret (generated and printed when unset)
  %s
  (see docs/operations.md, Configuration)

Flags:
`, defaultLocalTable, EnvAdminToken, strings.Join(config.Variables, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.maxConns < 1 || f.readTimeout <= 0 || f.idleTimeout <= 0 {
		return f, errors.New("-max-conns, -read-timeout and -idle-timeout must be positive")
	}
	if f.demoCrowd < 0 || f.demoCrowd > 100_000 {
		return f, errors.New("-demo-crowd must be between 0 and 100000")
	}
	return f, nil
}

// run serves the local server as args and getenv configure it until ctx
// ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runWith(ctx, seams{}, args, getenv, stdout, stderr)
}

// seams are what tests fix in the local server; zero values are the real
// ones.
type seams struct {
	keyring      []admissionpass.KeyringOption // after the configuration's
	partitionNow func() time.Time              // -partition-limits' clock
	dynamo       dynamostore.ClientOptions     // Backoff and AttemptTimeout, when set
	clock        clock.Clock                   // the queue service's, when set
}

// runWith is run with the seams s.
func runWith(ctx context.Context, s seams, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, err := parseLocalFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := config.FromEnv(getenv, false)
	if err != nil {
		return err
	}
	log := app.Logger(cfg, stderr)
	if f.passKey != "" {
		if cfg.Pass.WrapKMSKeyID != "" {
			return fmt.Errorf("-pass-key and %s: choose one", config.EnvPassWrapKMSKeyID)
		}
		cfg.Pass.KeyFile = f.passKey
	}

	ln, err := net.Listen("tcp", f.addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w\n(another server holds %s: stop it, or serve on another address: make run ADDR=127.0.0.1:3001, or -addr)", err, f.addr)
	} else if err != nil {
		return err
	}
	defer ln.Close() // if run fails before serving
	base := baseURL(ln.Addr())
	passes, err := localkeys.PassOption(ctx, cfg.Pass, base, s.keyring...)
	if err != nil {
		return fmt.Errorf("admission passes: %w", err)
	}
	shuffle, err := app.NewShuffleKey(ctx, cfg)
	if err != nil {
		return fmt.Errorf("shuffle key: %w", err)
	}
	challengeSecret, err := app.ChallengeSecret(ctx, cfg)
	if err != nil {
		return fmt.Errorf("challenge secret: %w", err)
	}
	svc := []queue.Option{queue.WithChallengeSecret(challengeSecret)}
	if s.clock != nil {
		svc = append(svc, queue.WithClock(s.clock))
	}
	a, where, model, closeStore, err := openStore(ctx, cfg, f.store, s, log, passes, app.WithShuffleKey(shuffle),
		app.WithServiceOptions(svc...))
	if err != nil {
		return err
	}
	defer closeStore()
	demoSite, err := demosite.New(demosite.Config{API: base, Issuer: a.Passes.Issuer(), Programs: a.Service})
	if err != nil {
		return err
	}
	secret := adminSecret(getenv, stdout)
	if err := f.createDemoProgram(ctx, a.Service, base); err != nil {
		return err
	}

	conns := newConnLimit(f.maxConns)
	srv := f.newServer(handler(a, secret, demoSite, model), conns, log)
	if m, ok := a.Store.(*memstore.Store); ok {
		go sweep(ctx, m, time.Minute)
	}
	f.printStartup(stdout, ln.Addr(), base, where, cfg, a.Passes.Issuer())
	return serve(ctx, srv, conns.listener(ln))
}

// adminSecret returns $ADMIN_TOKEN, or a random one it prints to stdout
// when that is unset.
func adminSecret(getenv func(string) string, stdout io.Writer) string {
	secret := getenv(EnvAdminToken)
	if secret == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secret = hex.EncodeToString(b[:])
		fmt.Fprintf(stdout, "%s not set; generated admin token: %s\n", EnvAdminToken, secret)
	}
	return secret
}

// createDemoProgram creates the -demo-program, if any, open at -demo-rate
// with the demo site as its target, and enters -demo-crowd people in it.
func (f localFlags) createDemoProgram(ctx context.Context, svc *queue.Service, base string) error {
	if f.demo == "" {
		return nil
	}
	set := api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(f.demoRate)), Paused: new(false),
		DisplayName: new(demoProfile.DisplayName), Message: new(demoProfile.Message), TargetURL: new(demosite.URL(base, f.demo)),
	}
	if _, _, err := svc.PutProgram(history.WithActor(ctx, history.SystemActor), f.demo, set); err != nil {
		return fmt.Errorf("create demo program: %w", err)
	}
	for range f.demoCrowd {
		if _, _, err := svc.Enter(ctx, f.demo, queue.Entry{}); err != nil {
			return fmt.Errorf("demo program's crowd: %w", err)
		}
	}
	return nil
}

// newServer returns the HTTP server of handler with the flags' timeouts,
// its connections tracked by conns and its errors logged to log.
func (f localFlags) newServer(handler http.Handler, conns *connLimit, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(5*time.Second, f.readTimeout),
		// A body that stops arriving fails to read after ReadTimeout, and
		// the handler still has time to answer it.
		ReadTimeout:    f.readTimeout,
		WriteTimeout:   f.readTimeout + 10*time.Second,
		IdleTimeout:    f.idleTimeout,
		MaxHeaderBytes: 16 << 10,
		ConnState:      conns.track,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// printStartup writes the start-up lines in one write, so that a reader
// who sees the first sees them all: the address, the store, the polling
// policy, the pass keys and the demo program's URLs.
func (f localFlags) printStartup(stdout io.Writer, addr net.Addr, base, where string, cfg config.Config, issuer string) {
	var b strings.Builder
	fmt.Fprintf(&b, "waiting room listening on http://%s (store: %s; default polling policy %s, tiers %s", addr, where, cfg.PolicyName, cfg.Tiers.Spec())
	if f.demo != "" {
		fmt.Fprintf(&b, "; demo program %q at %g/s, %d people in line", f.demo, f.demoRate, f.demoCrowd)
	}
	fmt.Fprintf(&b, ")\nadmission passes: iss %s, %s; keys at %s/.well-known/jwks.json\n", issuer, passKeySource(cfg.Pass), base)
	if f.demo != "" {
		fmt.Fprintf(&b, "demo site: %s (targetUrl of %q)\n", demosite.URL(base, f.demo), f.demo)
		fmt.Fprintf(&b, "waiting-room page of the demo program: %s%s%s\n", base, waitpage.PathPrefix, f.demo)
	}
	io.WriteString(stdout, b.String())
}

// serve runs srv on ln until it fails or ctx ends, then shuts it down
// within 5 s.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
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

// demoProfile is what the demo program's waiting-room page shows.
var demoProfile = api.Profile{
	DisplayName: "Demo concert · 데모 콘서트",
	Message:     "This is the local demo of the waiting room. Keep this page open: it shows your place and takes you in when it is your turn.",
}

// handler is a's API recording into a Prometheus registry, with GET
// /metrics, site under demosite.Prefix and the partition model's counts at
// partitionStatsPath beside it, outside the metered API.
func handler(a *app.App, secret string, site http.Handler, model *partitionmodel.Model) http.Handler {
	sink := prom.New()
	a.Metrics = sink
	h := withRoute(a.LocalHandler(secret), isGet("/metrics"), sink.Handler())
	h = withRoute(h, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, demosite.Prefix) }, site)
	return withRoute(h, isGet(partitionStatsPath), partitionStats(model))
}

// partitionStatsPath serves the partition model's counts (-partition-limits).
const partitionStatsPath = partitionmodel.StatsPath

// partitionStats serves m's summary (JSON: the totals and the busiest
// partitions), or 404 when m is nil.
func partitionStats(m *partitionmodel.Model) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if m == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": api.CodeNotFound, "message": "No partition model: start the server with -partition-limits."})
			return
		}
		_ = json.NewEncoder(w).Encode(m.Summarize())
	})
}

// withRoute serves the requests match picks with h and the others with
// next, untouched (a ServeMux would redirect non-canonical paths).
func withRoute(next http.Handler, match func(*http.Request) bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match(r) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isGet matches the GET requests of path.
func isGet(path string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.URL.Path == path && r.Method == http.MethodGet }
}

// baseURL returns the local API's base URL on addr, with a loopback host
// when addr is unspecified: the passes' default iss.
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
	case p.KeyFile != "":
		return "key " + p.KeyFile
	case p.WrapKMSKeyID != "":
		return "a keyring wrapped by KMS key " + p.WrapKMSKeyID
	}
	return "a keyring of this process (passes die with the server; -pass-key keeps them)"
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
