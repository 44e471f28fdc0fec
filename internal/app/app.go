// Package app builds the waiting room from its configuration, once per
// process: the store, the queue service, the admission pass issuer and the
// HTTP handlers that the Lambda functions and the local server serve.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/awsconfig"
	"github.com/example/waitingroom/internal/bypass"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/tickets"
)

// App is the service over its store, with the configuration and logger it
// was built with.
type App struct {
	Config  config.Config
	Log     *slog.Logger
	Store   queue.Store
	Service *queue.Service
	Passes  *admissionpass.Issuer  // signs passes, publishes the JWKS; nil: none
	Keys    *admissionpass.Keyring // the keyring Passes signs with; nil with fixed keys
	Edge    *edge.Publisher        // keeps the edge gate's store; nil: no gate
	Page    http.Handler           // the waiting-room page over Service
	// Metrics records every request the handlers answer (set it before building them).
	Metrics metrics.Observer
	// Tally counts the requests for the programs' reports.
	Tally          *report.Tally
	serviceOpts    []queue.Option
	edgeKV         edgekv.Store
	itemWriteUnits float64
	push           *Push // nil: no push
}

// Option configures New.
type Option func(*App)

// WithPasses makes every admission carry a pass signed by iss, and the
// queue handlers serve iss's JWKS.
func WithPasses(iss *admissionpass.Issuer) Option { return func(a *App) { a.Passes = iss } }

// WithKeyring makes every admission carry a pass of issuer iss ("": each request's base
// URL) signed by a keyring kept in ks (nil: the App's store), its keys wrapped by wrap.
func WithKeyring(iss string, ks admissionpass.KeyStore, wrap admissionpass.KeyWrapper, opts ...admissionpass.KeyringOption) Option {
	return func(a *App) {
		if ks == nil {
			var ok bool
			if ks, ok = a.Store.(admissionpass.KeyStore); !ok {
				panic(fmt.Sprintf("app: store %T keeps no signing keys", a.Store)) // a wiring error, found by every test
			}
		}
		a.Keys = admissionpass.NewKeyring(ks, wrap, append([]admissionpass.KeyringOption{admissionpass.WithRetain(PassRetain)}, opts...)...)
		a.Passes = admissionpass.NewSetIssuer(iss, a.Keys)
	}
}

// PassRetain is how long a superseded signing key stays published: the longest pass and a minute.
const PassRetain = max(settings.MaxAdmissionWindow, bypass.MaxValidity) + time.Minute

// WithEdge puts the programs behind the edge gate whose store is kv: the
// admin routes keep it in step with them (default site rules), and
// admitted answers carry edge tokens of its keys.
func WithEdge(kv edgekv.Store) Option {
	return func(a *App) {
		a.edgeKV = kv
		a.serviceOpts = append(a.serviceOpts, queue.WithEdgeTokens(edge.NewMinter(kv, clock.Real{})))
	}
}

// WithShuffleKey makes key sign the seeds of shuffled openings.
func WithShuffleKey(key shuffle.Key) Option { return WithServiceOptions(queue.WithShuffleKey(key)) }

// WithServiceOptions passes opts on to the queue service, after the configuration's.
func WithServiceOptions(opts ...queue.Option) Option {
	return func(a *App) { a.serviceOpts = append(a.serviceOpts, opts...) }
}

// WithItemWriteLimit sizes the ticket shards for items of units writes a second; 0: no shards.
func WithItemWriteLimit(units float64) Option { return func(a *App) { a.itemWriteUnits = units } }

// New builds the service over store as cfg describes, with the pass issuer if given.
func New(cfg config.Config, store queue.Store, log *slog.Logger, opts ...Option) *App {
	a := &App{Config: cfg, Log: log, Store: store, Metrics: metrics.Discard, itemWriteUnits: tickets.DefaultItemWriteUnits}
	for _, o := range opts {
		o(a)
	}
	sopts := []queue.Option{queue.WithPolicies(cfg.Policies), queue.WithProgramCache(cfg.ProgramCacheTTL), queue.WithLogger(log),
		queue.WithEnqueue(enqueue.NewVerifier(nil, nil))}
	if ts, ok := store.(tickets.Store); ok && a.itemWriteUnits > 0 {
		sopts = append(sopts, queue.WithTickets(tickets.New(ts, tickets.WithItemWriteLimit(a.itemWriteUnits), tickets.WithLogger(log))))
	}
	if a.Passes != nil {
		sopts = append(sopts, queue.WithPassSigner(Signer(a.Passes)))
	}
	a.Tally = report.NewTally(store, time.Now, log, queue.NewTokenID()[:8])
	sopts = append(sopts, queue.WithReportFlush(a.Tally.Flush))
	a.Service = queue.NewService(store, cfg.Policy, append(sopts, a.serviceOpts...)...)
	if a.edgeKV != nil {
		a.Edge = edge.NewPublisher(a.edgeKV, edge.DefaultSite(), a.Service, clock.Real{})
	}
	var key func(context.Context) string
	if a.push != nil {
		if ks, err := a.keyStore(); err == nil {
			key = (&pushKey{ks: ks}).get
		}
	}
	a.Page = newPage(a.Service, cfg.PageLogoURL, key, log)
	return a
}

// NewDynamo builds the App over the DynamoDB table cfg.TableName, reached through client.
func NewDynamo(cfg config.Config, client *dynamodb.Client, log *slog.Logger, opts ...Option) *App {
	return New(cfg, dynamostore.New(client, cfg.TableName, dynamostore.WithLogger(log)), log, opts...)
}

// FromEnv builds the admin function's App from getenv: JSON logs to w, EMF metrics on
// stdout; with PASS_WRAP_KMS_KEY_ID it signs bypass passes (PassOption).
func FromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*App, error) {
	return fromEnv(ctx, getenv, w, roleAdmin)
}

// ErrNoPassKey is QueueFromEnv's error when PASS_WRAP_KMS_KEY_ID is unset.
var ErrNoPassKey = errors.New("config: " + config.EnvPassWrapKMSKeyID + " is required: the queue function signs admission passes with keys that KMS key wraps (template.yaml: PassWrapKey)")

// ErrNoShuffleKey is QueueFromEnv's error when SHUFFLE_KMS_KEY_ID is unset.
var ErrNoShuffleKey = errors.New("config: " + config.EnvShuffleKMSKeyID + " is required: the queue function seeds shuffled openings with that KMS key (template.yaml: ShuffleKey)")

// QueueFromEnv builds the queue function's App: FromEnv's, which needs the pass signing,
// the shuffle key and the challenges' secret (else ErrNoPassKey, ErrNoShuffleKey, ErrNoChallengeSecret).
func QueueFromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*App, error) {
	return fromEnv(ctx, getenv, w, roleQueue)
}

// role is the function an App is built for.
type role int

const (
	roleAdmin role = iota
	roleQueue
	roleSender   // the push sender: the shuffle key, to read shuffled places
	roleReporter // the reporter: the store alone
)

func fromEnv(ctx context.Context, getenv func(string) string, w io.Writer, r role) (*App, error) {
	queueFunction := r == roleQueue
	cfg, err := config.FromEnv(getenv, true)
	if err != nil {
		return nil, err
	}
	switch {
	case !queueFunction:
	case cfg.Pass.WrapKMSKeyID == "":
		return nil, ErrNoPassKey
	case cfg.ShuffleKMSKeyID == "":
		return nil, ErrNoShuffleKey
	case cfg.ChallengeSecretARN == "":
		return nil, ErrNoChallengeSecret
	}
	var opts []Option
	if cfg.Pass.WrapKMSKeyID != "" && (queueFunction || r == roleAdmin) {
		passes, err := PassOption(ctx, cfg.Pass, "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, passes)
	}
	if queueFunction || r == roleSender && cfg.ShuffleKMSKeyID != "" {
		shuffle, err := NewShuffleKey(ctx, cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithShuffleKey(shuffle))
	}
	if queueFunction || r == roleAdmin && cfg.ChallengeSecretARN != "" {
		// The admin function keys accounts' token ids as the queue function does.
		secret, err := ChallengeSecret(ctx, cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithServiceOptions(queue.WithChallengeSecret(secret)))
	}
	if cfg.PushSubject != "" {
		opts = append(opts, WithPush(Push{Subject: cfg.PushSubject}))
	}
	if cfg.EdgeKVSARN != "" && r != roleReporter {
		awscfg, err := awsconfig.Load(ctx, cfg.EdgeKVSEndpoint)
		if err != nil {
			return nil, fmt.Errorf("edge KeyValueStore client: %w", err)
		}
		opts = append(opts, WithEdge(edgekv.New(edgekv.NewAPI(awscfg, cfg.EdgeKVSEndpoint), cfg.EdgeKVSARN)))
	}
	client, err := dynamostore.NewClient(ctx, cfg.DynamoEndpoint)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	a := NewDynamo(cfg, client, Logger(cfg, w), opts...)
	a.Metrics = metrics.NewEMF(os.Stdout, cfg.MetricsNamespace, metrics.WithEMFInterval(cfg.MetricsInterval))
	return a, nil
}

// PassOption returns KeyringOf's option, with the App's store and the KMS key p.WrapKMSKeyID.
func PassOption(ctx context.Context, p config.Pass, iss string, opts ...admissionpass.KeyringOption) (Option, error) {
	client, err := admissionpass.NewKMSClient(ctx, p.KMSEndpoint)
	if err != nil {
		return nil, fmt.Errorf("KMS client: %w", err)
	}
	return KeyringOf(p, iss, nil, admissionpass.NewKMSWrapper(client, p.WrapKMSKeyID), opts...), nil
}

// KeyringOf is WithKeyring with the issuer (else iss) and rotation of p.
func KeyringOf(p config.Pass, iss string, ks admissionpass.KeyStore, wrap admissionpass.KeyWrapper, opts ...admissionpass.KeyringOption) Option {
	if p.KeyRotation > 0 {
		opts = append([]admissionpass.KeyringOption{admissionpass.WithRotation(p.KeyRotation)}, opts...)
	}
	return WithKeyring(cmp.Or(p.Issuer, iss), ks, wrap, opts...)
}

// NewShuffleKey returns the KMS key cfg.ShuffleKMSKeyID, else an RSA key generated now.
func NewShuffleKey(ctx context.Context, cfg config.Config) (shuffle.Key, error) {
	if cfg.ShuffleKMSKeyID == "" {
		return shufflekey.GenerateLocalKey()
	}
	client, err := admissionpass.NewKMSClient(ctx, cfg.Pass.KMSEndpoint)
	if err != nil {
		return nil, fmt.Errorf("KMS client: %w", err)
	}
	return shufflekey.NewKMSKey(client, cfg.ShuffleKMSKeyID), nil
}

// Signer is iss as the queue service's PassSigner and bypass.Signer.
func Signer(iss *admissionpass.Issuer) queue.PassSigner { return passSigner{iss} }

type passSigner struct{ iss *admissionpass.Issuer }

func (s passSigner) SignPass(ctx context.Context, t queue.Token) (string, error) {
	return s.iss.Issue(ctx, admissionpass.Admission{ProgramID: t.ProgramID, TokenID: t.ID, Ticket: t.Ticket,
		AdmittedAt: t.AdmittedAt, ExpiresAt: t.AdmissionExpiresAt, Account: t.Account})
}

func (s passSigner) SignBypass(ctx context.Context, b bypass.Pass) (string, error) {
	return s.iss.Issue(ctx, admissionpass.Admission{ProgramID: b.ProgramID, TokenID: b.ID,
		AdmittedAt: b.IssuedAt, ExpiresAt: b.ExpiresAt, Bypass: true})
}

// Logger returns the JSON logger (Lambda's JSON log format) at cfg's level.
func Logger(cfg config.Config, w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// QueueHandler is the public function's API and the waiting-room page.
func (a *App) QueueHandler() http.Handler {
	return withPage(a.meteredPage(), httpapi.NewQueue(a.Service, a.options()...))
}

// AdminHandler is the admin function's API, behind IAMAuth.
func (a *App) AdminHandler() http.Handler {
	return httpapi.NewAdmin(a.Service, httpapi.IAMAuth(), a.adminOptions()...)
}

// QueueTimeout is the queue function's Lambda timeout (template.yaml).
const QueueTimeout = 5 * time.Second

// LocalHandler is the local server's handler: the queue API, the admin routes behind
// BearerAuth(secret), and the page, each request within QueueTimeout as on Lambda.
func (a *App) LocalHandler(secret string) http.Handler {
	h := withPage(a.meteredPage(), httpapi.New(a.Service, httpapi.BearerAuth(secret), a.adminOptions()...))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), QueueTimeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// options are the handlers' logger, metrics and pass keys.
func (a *App) options() []httpapi.Option {
	return []httpapi.Option{httpapi.WithLogger(a.Log), httpapi.WithObserver(metrics.Tee(a.Metrics, a.Tally)), httpapi.WithPasses(a.Passes)}
}

// adminOptions are options and the keyring of the admin key routes.
func (a *App) adminOptions() []httpapi.Option {
	return append(a.options(), httpapi.WithKeyring(a.Keys), httpapi.WithEdge(a.Edge))
}

// StartLambda is a function's main: it builds the App with fromEnv and serves handler's
// routes under the Lambda runtime; a build error is a JSON line on stderr and exit status 1.
// The metrics held are written when Lambda ends the instance (SIGTERM).
func StartLambda(fromEnv func(context.Context, func(string) string, io.Writer) (*App, error), handler func(*App) http.Handler) {
	a, err := fromEnv(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cold start", "error", err.Error())
		os.Exit(1)
	}
	opts := []lambda.Option{lambda.WithEnableSIGTERM(func() {
		if emf, ok := a.Metrics.(*metrics.EMF); ok {
			emf.Flush()
		}
		ctx, cancel := context.WithTimeout(context.Background(), report.FlushBudget)
		defer cancel()
		_ = a.Tally.Flush(ctx) // the minute is lost if the store is down
	})}
	lambda.StartWithOptions(httpapi.Lambda(handler(a)), opts...)
}
