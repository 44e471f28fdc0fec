// Command queue is the Lambda function behind the public queue routes
// (enter, poll, leave), the JWKS of the admission passes and the API's
// $default route. It only wires: the
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

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/httpapi"
)

func main() {
	// Once per cold start: every invocation of this instance shares the
	// DynamoDB and KMS clients' connection pools and the pass issuer. No
	// PASS_KMS_KEY_ID is an init error: no admission without a pass; no
	// SHUFFLE_KMS_KEY_ID too: no shuffled opening without its seed.
	a, err := app.QueueFromEnv(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		// One JSON line, then exit: Lambda reports the init error and the
		// next request gets a fresh try.
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cold start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(httpapi.Lambda(a.QueueHandler()))
}
