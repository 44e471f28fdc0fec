// Command queue is the Lambda function behind the public queue routes
// (enter, poll, leave) and the API's $default route. It only wires: the
// behaviour is in internal/httpapi and internal/queue.
//
// Build it with -tags lambda.norpc into a file named bootstrap for the
// provided.al2023 runtime (make build-QueueFunction).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv, true)
	if err != nil {
		fail("bad configuration", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	// Once per cold start: every invocation of this instance shares the
	// client's connection pool.
	client, err := dynamostore.NewClient(context.Background(), cfg.DynamoEndpoint)
	if err != nil {
		fail("DynamoDB client", err)
	}
	svc := cfg.NewService(dynamostore.New(client, cfg.TableName))
	h := httpapi.New(svc, httpapi.WithLogger(log))
	lambda.Start(h.Handle)
}

// fail logs err as one JSON line and exits: Lambda reports the init error
// and the next request gets a fresh try, instead of every request failing.
func fail(msg string, err error) {
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error(msg, "error", err.Error())
	os.Exit(1)
}
