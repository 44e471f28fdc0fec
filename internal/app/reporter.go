package app

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

// ReporterFromEnv builds the reporter function's App from getenv: FromEnv's,
// with the store alone.
func ReporterFromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*App, error) {
	return fromEnv(ctx, getenv, w, roleReporter)
}

// StartReporter is the reporter function's main: each scheduled invocation
// makes the final reports due (queue.Service.SettleReports).
func StartReporter() {
	a, err := ReporterFromEnv(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cold start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context) error {
		made, err := a.Service.SettleReports(ctx)
		a.Log.InfoContext(ctx, "reports settled", "made", made)
		return err
	})
}
