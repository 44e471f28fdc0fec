// Command queue is the Lambda function behind the public queue routes
// (enter, poll, leave), the passes' JWKS and the API's $default route; the
// behaviour is in internal/httpapi and internal/queue. Build it with -tags
// lambda.norpc as bootstrap for provided.al2023 (make build-QueueFunction).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/httpapi"
)

func main() {
	// Once per cold start, shared by every invocation. A missing
	// PASS_WRAP_KMS_KEY_ID or SHUFFLE_KMS_KEY_ID is an init error.
	a, err := app.QueueFromEnv(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		// One JSON line, then exit: Lambda reports the init error and
		// retries on the next request.
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cold start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(httpapi.Lambda(a.QueueHandler()))
}
