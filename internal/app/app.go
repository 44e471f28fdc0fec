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

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/queue"
)

// App is the service over its store, with the configuration and logger it
// was built with.
type App struct {
	Config  config.Config
	Log     *slog.Logger
	Store   queue.Store
	Service *queue.Service
}

// New builds the service over store as cfg describes: the default and named
// polling policies, the program cache; extra options follow (the local
// server's scaled item write limit).
func New(cfg config.Config, store queue.Store, log *slog.Logger, opts ...queue.Option) *App {
	svc := queue.NewService(store, cfg.Policy, append([]queue.Option{
		queue.WithPolicies(cfg.Policies),
		queue.WithProgramCache(cfg.ProgramCacheTTL)}, opts...)...)
	return &App{Config: cfg, Log: log, Store: store, Service: svc}
}

// NewDynamo builds the App over the DynamoDB table cfg.TableName, reached
// through client.
func NewDynamo(cfg config.Config, client *dynamodb.Client, log *slog.Logger, opts ...queue.Option) *App {
	return New(cfg, dynamostore.New(client, cfg.TableName), log, opts...)
}

// FromEnv is a Lambda function's cold start: the configuration from getenv
// (TABLE_NAME required), JSON logs to w at LOG_LEVEL, and the DynamoDB
// client, built here once (at DYNAMODB_ENDPOINT when set).
func FromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*App, error) {
	cfg, err := config.FromEnv(getenv, true)
	if err != nil {
		return nil, err
	}
	client, err := dynamostore.NewClient(ctx, cfg.DynamoEndpoint)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	return NewDynamo(cfg, client, Logger(cfg, w)), nil
}

// Logger returns the JSON logger (Lambda's JSON log format) at cfg's level.
func Logger(cfg config.Config, w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// QueueHandler is the public function's API: enter, poll, leave.
func (a *App) QueueHandler() http.Handler {
	return httpapi.NewQueue(a.Service, httpapi.WithLogger(a.Log))
}

// AdminHandler is the admin function's API, for requests API Gateway's
// AWS_IAM authorizer let through.
func (a *App) AdminHandler() http.Handler {
	return httpapi.NewAdmin(a.Service, httpapi.IAMAuth(), httpapi.WithLogger(a.Log))
}

// LocalHandler is the local server's API: both, the admin routes behind
// "Authorization: Bearer secret".
func (a *App) LocalHandler(secret string) http.Handler {
	return httpapi.New(a.Service, httpapi.BearerAuth(secret), httpapi.WithLogger(a.Log))
}
