// Package app builds the waiting room from its configuration, once per
// process: the store, the queue service and the HTTP handlers that the
// Lambda functions and the local server serve.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
)

// App is the service over its store, with the configuration and logger it
// was built with.
type App struct {
	Config  config.Config
	Log     *slog.Logger
	Store   queue.Store
	Service *queue.Service
	// Page is the waiting-room page over Service (internal/waitpage).
	Page http.Handler
	// Metrics records every request the handlers answer (set it before
	// building them); metrics.Discard unless FromEnv or the caller sets it.
	Metrics metrics.Observer
}

// New builds the service over store as cfg describes: the default and named
// polling policies, the program cache.
func New(cfg config.Config, store queue.Store, log *slog.Logger) *App {
	svc := queue.NewService(store, cfg.Policy,
		queue.WithPolicies(cfg.Policies),
		queue.WithProgramCache(cfg.ProgramCacheTTL))
	return &App{Config: cfg, Log: log, Store: store, Service: svc, Page: newPage(svc, cfg.PageLogoURL, log), Metrics: metrics.Discard}
}

// NewDynamo builds the App over the DynamoDB table cfg.TableName, reached
// through client.
func NewDynamo(cfg config.Config, client *dynamodb.Client, log *slog.Logger) *App {
	return New(cfg, dynamostore.New(client, cfg.TableName), log)
}

// FromEnv is a Lambda function's cold start: the configuration from getenv
// (TABLE_NAME required), JSON logs to w at LOG_LEVEL, metrics as EMF lines
// on stdout in METRICS_NAMESPACE, and the DynamoDB client, built here once
// (at DYNAMODB_ENDPOINT when set).
func FromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*App, error) {
	cfg, err := config.FromEnv(getenv, true)
	if err != nil {
		return nil, err
	}
	client, err := dynamostore.NewClient(ctx, cfg.DynamoEndpoint)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	a := NewDynamo(cfg, client, Logger(cfg, w))
	a.Metrics = metrics.NewEMF(os.Stdout, cfg.MetricsNamespace)
	return a, nil
}

// Logger returns the JSON logger (Lambda's JSON log format) at cfg's level.
func Logger(cfg config.Config, w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// QueueHandler is the public function's API (enter, poll, leave) and the
// waiting-room page.
func (a *App) QueueHandler() http.Handler {
	return withPage(a.Page, httpapi.NewQueue(a.Service, a.options()...))
}

// AdminHandler is the admin function's API, for requests API Gateway's
// AWS_IAM authorizer let through.
func (a *App) AdminHandler() http.Handler {
	return httpapi.NewAdmin(a.Service, httpapi.IAMAuth(), a.options()...)
}

// QueueTimeout is the queue function's Lambda timeout (template.yaml): the
// deadline every request works within, retries of the store included.
const QueueTimeout = 5 * time.Second

// LocalHandler is the local server's API, both, the admin routes behind
// "Authorization: Bearer secret", and the waiting-room page. Each request
// gets QueueTimeout as its deadline, as on Lambda, so that a slow store is
// answered as it would be there.
func (a *App) LocalHandler(secret string) http.Handler {
	h := withPage(a.Page, httpapi.New(a.Service, httpapi.BearerAuth(secret), a.options()...))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), QueueTimeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// options are the handlers' logger and metrics.
func (a *App) options() []httpapi.Option {
	return []httpapi.Option{httpapi.WithLogger(a.Log), httpapi.WithObserver(a.Metrics)}
}
