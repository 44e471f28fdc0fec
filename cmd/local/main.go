// Command local serves the waiting room's HTTP API on this machine with the
// Lambda functions' handlers behind net/http, on an in-memory store or a
// DynamoDB API, for development and load tests.
package main

import (
	"cmp"
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

	"golang.org/x/net/netutil"

	"github.com/example/waitingroom/functions/edgegate"
	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/notify"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tools/cfjs"
	"github.com/example/waitingroom/internal/tools/demosite"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/localkvs"
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
	if err := run(ctx, seams{}, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

type localFlags struct {
	addr, demo, passKey      string
	demoRate                 float64
	demoCrowd, maxConns      int
	dynamo                   string // "", "moto" or "dynalite": start that server
	partitionLimits          string // partitionmodel.ParseSpec's
	createTable              bool
	readTimeout, idleTimeout time.Duration
}

// parseLocalFlags parses args; it returns flag.ErrHelp for -h.
func parseLocalFlags(args []string, stderr io.Writer) (localFlags, error) {
	var f localFlags
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:3000", "listen address (SAM's local port by default)")
	fs.StringVar(&f.demo, "demo-program", "demo", "program created at start (empty: none)")
	fs.Float64Var(&f.demoRate, "demo-rate", 1, "admission rate of the demo program, people per second")
	fs.IntVar(&f.demoCrowd, "demo-crowd", 300, "people put in the demo program's line at start, ahead of whoever opens its page")
	fs.StringVar(&f.dynamo, "dynamo", "", "start a local DynamoDB API and use it: moto (moto_server, behind a proxy that serialises its requests) or dynalite")
	fs.BoolVar(&f.createTable, "create-table", false, "with "+config.EnvDynamoEndpoint+": create the table if it does not exist")
	fs.StringVar(&f.partitionLimits, "partition-limits", "", "with a DynamoDB API: throttle each partition key as DynamoDB does, scale=F (AWS's 1,000 WCU and 3,000 RCU a second times F, e.g. scale=0.1) or write=W,read=R; its counts are at "+partitionmodel.StatsPath)
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
protected site checks them at /demo-site/{programId}, and signs enqueue
tokens at /demo/enqueue-token (its keys: /demo/.well-known/enqueue-jwks.json).
Shuffled openings are seeded by SHUFFLE_KMS_KEY_ID or an RSA key generated
at start.

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

// seams are what tests fix in the local server; zero values are the real ones.
type seams struct {
	keyring      []admissionpass.KeyringOption // after the configuration's
	partitionNow func() time.Time              // -partition-limits' clock
	dynamo       dynamostore.ClientOptions     // Backoff and AttemptTimeout, when set
	clock        clock.Clock                   // the queue service's, when set
}

// run serves the local server as args, getenv and s configure it until ctx ends.
func run(ctx context.Context, s seams, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	clk := cmp.Or(s.clock, clock.Clock(clock.Real{}))
	svc := app.WithServiceOptions(queue.WithChallengeSecret(challengeSecret), queue.WithClock(clk),
		queue.WithEnqueue(enqueue.NewVerifier(nil, clk.Now, enqueue.AllowHTTP()))) // the demo site's JWKS is on loopback http
	kvs, edgeKV, stopKVS, err := edgeStore(ctx)
	if err != nil {
		return err
	}
	defer stopKVS()
	vapidWrap, err := localkeys.NewWrapper()
	if err != nil {
		return err
	}
	// Pushes to the browsers' push services, signed by a key of the process.
	push := app.WithPush(app.Push{Subject: cmp.Or(cfg.PushSubject, localPushSubject), Wrap: vapidWrap, Clock: clk})
	a, where, model, closeStore, err := openStore(ctx, cfg, f, s, log, passes, app.WithShuffleKey(shuffle), svc, app.WithEdge(edgeKV), push)
	if err != nil {
		return err
	}
	defer closeStore()
	sender, err := a.Sender(ctx)
	if err != nil {
		return fmt.Errorf("push sender: %w", err)
	}
	go func() { // a run a minute, as the schedule starts them on AWS
		for ctx.Err() == nil {
			start := clk.Now()
			_ = sender.Run(ctx, start.Add(notify.RunFor))
			_ = clk.Sleep(ctx, start.Add(notify.RunFor).Sub(clk.Now()))
		}
	}()
	gate, err := cfjs.Compile(edgegate.Source)
	if err != nil {
		return fmt.Errorf("edge gate: %w", err)
	}
	shop := gate.Handler(kvs.Reader(), clk.Now, demosite.Shop())
	demoSite, err := demosite.New(demosite.Config{API: base, Issuer: a.Passes.Issuer(), Programs: a.Service})
	if err != nil {
		return err
	}
	issuer, err := newDemoIssuer(base)
	if err != nil {
		return err
	}
	secret := adminSecret(getenv, stdout)
	if err := f.createDemoProgram(ctx, a, base); err != nil {
		return err
	}

	conns := &connLimit{max: f.maxConns, idle: map[net.Conn]time.Time{}}
	srv := &http.Server{
		Handler:           handler(a, secret, demoSite, shop, issuer, model),
		ReadHeaderTimeout: min(5*time.Second, f.readTimeout),
		// A body that stops arriving fails to read, and the handler still has time to answer.
		ReadTimeout:    f.readTimeout,
		WriteTimeout:   f.readTimeout + 10*time.Second,
		IdleTimeout:    f.idleTimeout,
		MaxHeaderBytes: 16 << 10,
		ConnState:      conns.track,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if m, ok := a.Store.(*memstore.Store); ok {
		go sweep(ctx, m, time.Minute)
	}
	f.printStartup(stdout, ln.Addr(), base, where, cfg, a.Passes.Issuer(), issuer.issuer)
	return serve(ctx, srv, netutil.LimitListener(ln, f.maxConns))
}

// localPushSubject is the VAPID subject of the local server's pushes
// unless PUSH_SUBJECT names one.
const localPushSubject = "mailto:waiting-room@localhost"

// adminSecret returns $ADMIN_TOKEN, or else a random one it prints to stdout.
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

// createDemoProgram creates the -demo-program, if any, at the edge gate in
// front of the demo shop, and enters -demo-crowd people in it.
func (f localFlags) createDemoProgram(ctx context.Context, a *app.App, base string) error {
	if f.demo == "" {
		return nil
	}
	set := api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(f.demoRate)), Paused: new(false),
		DisplayName: new(demoProfile.DisplayName), Message: new(demoProfile.Message), TargetURL: new(demosite.URL(base, f.demo)),
		EdgeMode: new(settings.EdgeOn), EdgePaths: &[]string{demosite.ShopPrefix},
	}
	c, _, err := a.Service.PutProgram(history.WithActor(ctx, history.SystemActor), f.demo, set)
	if err == nil {
		err = a.Edge.Changed(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("create demo program: %w", err)
	}
	for range f.demoCrowd {
		if _, _, err := a.Service.Enter(ctx, f.demo, queue.Entry{}); err != nil {
			return fmt.Errorf("demo program's crowd: %w", err)
		}
	}
	return nil
}

// edgeStore serves an emulated KeyValueStore of the edge gate on loopback
// and returns it, its client through the SDK (as on AWS), and its stop.
func edgeStore(ctx context.Context) (*localkvs.Server, edgekv.Store, func(), error) {
	kvs := localkvs.New("")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("edge gate's store: %w", err)
	}
	srv := &http.Server{Handler: kvs, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	endpoint := "http://" + ln.Addr().String()
	cfg, err := awsconfig.Load(ctx, endpoint)
	if err != nil {
		srv.Close()
		return nil, nil, nil, fmt.Errorf("edge gate's store: %w", err)
	}
	return kvs, edgekv.New(edgekv.NewAPI(cfg, endpoint), kvs.ARN()), func() { srv.Close() }, nil
}

// printStartup writes the start-up lines in one write, so that a reader who sees the first sees them all.
func (f localFlags) printStartup(stdout io.Writer, addr net.Addr, base, where string, cfg config.Config, issuer, enqueueIssuer string) {
	var b strings.Builder
	fmt.Fprintf(&b, "waiting room listening on http://%s (store: %s; default polling policy %s, tiers %s", addr, where, cfg.PolicyName, cfg.Tiers.Spec())
	if f.demo != "" {
		fmt.Fprintf(&b, "; demo program %q at %g/s, %d people in line", f.demo, f.demoRate, f.demoCrowd)
	}
	fmt.Fprintf(&b, ")\nadmission passes: iss %s, %s; keys at %s/.well-known/jwks.json\n", issuer, passKeySource(cfg.Pass), base)
	if f.demo != "" {
		fmt.Fprintf(&b, "demo site: %s (targetUrl of %q)\n", demosite.URL(base, f.demo), f.demo)
		fmt.Fprintf(&b, "waiting-room page of the demo program: %s%s%s\n", base, waitpage.PathPrefix, f.demo)
		fmt.Fprintf(&b, "demo shop, a site with no code behind the edge gate: %s%s\n", base, demosite.ShopPrefix)
	}
	fmt.Fprintf(&b, "demo site's enqueue tokens: iss %s, keys at %s%s, a token at %s%s?program=ID&account=SUB, signed in to the queue at %s%s?program=ID&account=SUB\n",
		enqueueIssuer, base, demoJWKSPath, base, demoTokenPath, base, demoEnterPath)
	io.WriteString(stdout, b.String())
}

// serve runs srv on ln until it fails or ctx ends, then shuts it down within 5 s.
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

// handler is a's API recording into a Prometheus registry, with GET /metrics, site and the
// partition model's counts beside it, routed by hand (a ServeMux redirects non-canonical paths).
func handler(a *app.App, secret string, site, shop, issuer http.Handler, model *partitionmodel.Model) http.Handler {
	sink := prom.New()
	a.Metrics = sink
	local, metrics := a.LocalHandler(secret), sink.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		get := r.Method == http.MethodGet
		switch {
		case get && r.URL.Path == "/metrics":
			metrics.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, demosite.Prefix):
			site.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, demosite.ShopPrefix):
			shop.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, demoIssuerPrefix):
			issuer.ServeHTTP(w, r)
		case get && r.URL.Path == partitionmodel.StatsPath:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			if model == nil {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(map[string]string{"code": api.CodeNotFound, "message": "No partition model: start the server with -partition-limits."})
				return
			}
			_ = json.NewEncoder(w).Encode(model.Summarize())
		default:
			local.ServeHTTP(w, r)
		}
	})
}

// baseURL returns the local API's base URL on addr, with a loopback host when addr is unspecified.
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
