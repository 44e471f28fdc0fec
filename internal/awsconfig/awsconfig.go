// Package awsconfig loads the AWS configuration the functions' clients
// share, local endpoints included, and bounds calls by their deadline.
package awsconfig

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"
)

// Load returns the AWS configuration from the environment with opts. A local endpoint ("":
// AWS) becomes the BaseEndpoint, with us-east-1 and dummy credentials unless the environment names some.
func Load(ctx context.Context, endpoint string, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	if endpoint != "" && !credentialsInEnv() {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
		cfg.Region = cmp.Or(cfg.Region, "us-east-1")
	}
	return cfg, nil
}

// credentialsInEnv reports whether the environment names credentials, reading variables only:
// resolving the default chain outside AWS waits for the instance metadata service to time out.
func credentialsInEnv() bool {
	vars := []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"}
	return slices.ContainsFunc(vars, func(v string) bool { return os.Getenv(v) != "" })
}

// ReserveBeforeDeadline is an API option that makes every call, retries included, give up
// reserve (at most a quarter of the time left) before its context's deadline.
func ReserveBeforeDeadline(reserve time.Duration) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DeadlineReserve",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if deadline, ok := ctx.Deadline(); ok {
					r := min(reserve, time.Until(deadline)/4)
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, deadline.Add(-r))
					defer cancel()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}
