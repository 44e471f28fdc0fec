package awsconfig_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"

	"github.com/example/waitingroom/internal/awsconfig"
)

// TestLoadLocal: a local endpoint gets a region and dummy credentials when
// the environment names none, and the environment's when it does.
func TestLoadLocal(t *testing.T) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	cfg, err := awsconfig.Load(t.Context(), "http://127.0.0.1:8000")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || cfg.Region != "us-east-1" || creds.AccessKeyID != "local" {
		t.Errorf("local endpoint: region %q, key %q, %v; want us-east-1 and the dummy key", cfg.Region, creds.AccessKeyID, err)
	}
	if got := aws.ToString(cfg.BaseEndpoint); got != "http://127.0.0.1:8000" {
		t.Errorf("local endpoint: BaseEndpoint %q, want the endpoint", got)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "ap-northeast-2")
	cfg, err = awsconfig.Load(t.Context(), "http://127.0.0.1:8000")
	if err != nil {
		t.Fatal(err)
	}
	if creds, _ := cfg.Credentials.Retrieve(t.Context()); cfg.Region != "ap-northeast-2" || creds.AccessKeyID != "AKIDEXAMPLE" {
		t.Errorf("with the environment's: region %q, key %q", cfg.Region, creds.AccessKeyID)
	}
}

// TestReserveBeforeDeadline: a call gives up the reserve before its
// context's deadline, at most a quarter of the time left, and a context
// without a deadline gets none.
func TestReserveBeforeDeadline(t *testing.T) {
	stack := middleware.NewStack("test", func() any { return nil })
	if err := awsconfig.ReserveBeforeDeadline(500 * time.Millisecond)(stack); err != nil {
		t.Fatal(err)
	}
	var got time.Time
	var has bool
	handler := middleware.HandlerFunc(func(ctx context.Context, in any) (any, middleware.Metadata, error) {
		got, has = ctx.Deadline()
		return nil, middleware.Metadata{}, nil
	})
	for _, tc := range []struct {
		left, want time.Duration // time left, reserve taken
	}{
		{4 * time.Second, 500 * time.Millisecond},
		{time.Second, 250 * time.Millisecond},
	} {
		deadline := time.Now().Add(tc.left)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		if _, _, err := middleware.DecorateHandler(handler, stack).Handle(ctx, nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		if reserve := deadline.Sub(got); !has || reserve < tc.want-20*time.Millisecond || reserve > tc.want+20*time.Millisecond {
			t.Errorf("%s left: reserve %s, want about %s", tc.left, reserve, tc.want)
		}
	}
	if _, _, err := middleware.DecorateHandler(handler, stack).Handle(context.Background(), nil); err != nil || has {
		t.Errorf("no deadline: got one (%v, %v)", got, err)
	}
}
