package edgekv_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/tools/localkvs"
)

// newClient returns a Client of the SDK against an emulated store on loopback.
func newClient(t *testing.T) (*edgekv.Client, *localkvs.Server) {
	t.Helper()
	emu := localkvs.New("")
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		// As awsconfig.Load makes it for local DynamoDB: NewAPI must not follow it.
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
	}
	return edgekv.New(edgekv.NewAPI(cfg, srv.URL), emu.ARN()), emu
}

func TestPutGet(t *testing.T) {
	tests := []struct{ name, key, value string }{
		{"keys", "keys", `{"current":{"kid":"k1","k":"` + strings.Repeat("a", 43) + `"}}`},
		{"program", "p.gala", `{"mode":"on","failOpenUntil":0,"session":3600}`},
		{"slash and unicode", "a/b ?é%2F", "ünïcode"},
		{"empty value", "empty", ""},
		{"largest", strings.Repeat("k", edgekv.MaxKeyBytes), strings.Repeat("v", edgekv.MaxValueBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, emu := newClient(t)
			ctx := t.Context()
			for _, v := range []string{"first", tt.value} { // a put, then one over it
				if err := c.Put(ctx, tt.key, v); err != nil {
					t.Fatalf("Put(%q): %v", tt.key, err)
				}
			}
			got, err := c.Get(ctx, tt.key)
			if err != nil {
				t.Fatalf("Get(%q): %v", tt.key, err)
			}
			if diff := cmp.Diff(tt.value, got); diff != "" {
				t.Errorf("Get(%q) (-want +got):\n%s", tt.key, diff)
			}
			if v, ok := emu.Get(tt.key); !ok || v != tt.value {
				t.Errorf("emulator holds %q, %v; want %q", v, ok, tt.value)
			}
		})
	}
}

func TestGetMissing(t *testing.T) {
	c, emu := newClient(t)
	emu.Set("other", "x")
	_, err := c.Get(t.Context(), "p.opera")
	if !errors.Is(err, edgekv.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if want := `edgekv: get "p.opera": `; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
}

func TestPutConflict(t *testing.T) {
	tests := []struct {
		name      string
		rule      func(n int) bool
		wantCalls int // of DescribeKeyValueStore and of PutKey each
		wantErr   bool
	}{
		{"none", func(int) bool { return false }, 1, false},
		{"once", func(n int) bool { return n == 1 }, 2, false},
		{"all but the last", func(n int) bool { return n < edgekv.MaxPutAttempts }, edgekv.MaxPutAttempts, false},
		{"always", func(int) bool { return true }, edgekv.MaxPutAttempts, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, emu := newClient(t)
			emu.FailPuts(tt.rule)
			err := c.Put(t.Context(), "p.gala", `{"mode":"on"}`)
			var ce *types.ConflictException
			if tt.wantErr != (err != nil) || tt.wantErr && !errors.As(err, &ce) {
				t.Fatalf("Put: %v, want a ConflictException: %v", err, tt.wantErr)
			}
			if want := `edgekv: put "p.gala": the ETag changed`; tt.wantErr && !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			got := map[string]int{"DescribeKeyValueStore": emu.Calls("DescribeKeyValueStore"), "PutKey": emu.Calls("PutKey")}
			want := map[string]int{"DescribeKeyValueStore": tt.wantCalls, "PutKey": tt.wantCalls}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			v, ok := emu.Get("p.gala")
			if ok == tt.wantErr || ok && v != `{"mode":"on"}` {
				t.Errorf("store holds %q, %v after Put error %v", v, ok, err)
			}
		})
	}
}

func TestRefusedBeforeAnyCall(t *testing.T) {
	long := strings.Repeat("k", edgekv.MaxKeyBytes+1)
	tests := []struct {
		name string
		call func(context.Context, *edgekv.Client) error
	}{
		{"put empty key", func(ctx context.Context, c *edgekv.Client) error { return c.Put(ctx, "", "v") }},
		{"put key over 512 bytes", func(ctx context.Context, c *edgekv.Client) error { return c.Put(ctx, long, "v") }},
		{"put value over 1 KB", func(ctx context.Context, c *edgekv.Client) error {
			return c.Put(ctx, "site", strings.Repeat("v", edgekv.MaxValueBytes+1))
		}},
		{"get empty key", func(ctx context.Context, c *edgekv.Client) error { _, err := c.Get(ctx, ""); return err }},
		{"get key over 512 bytes", func(ctx context.Context, c *edgekv.Client) error { _, err := c.Get(ctx, long); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, emu := newClient(t)
			if err := tt.call(t.Context(), c); !errors.Is(err, edgekv.ErrLimit) {
				t.Errorf("got %v, want ErrLimit", err)
			}
			if n := emu.Calls("DescribeKeyValueStore") + emu.Calls("GetKey") + emu.Calls("PutKey"); n != 0 {
				t.Errorf("the store received %d requests, want none", n)
			}
		})
	}
}

func TestCanceled(t *testing.T) {
	c, emu := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Put(ctx, "keys", "{}"); !errors.Is(err, context.Canceled) {
		t.Errorf("Put: %v, want context.Canceled", err)
	}
	if _, err := c.Get(ctx, "keys"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	if _, ok := emu.Get("keys"); ok {
		t.Error("a canceled Put was applied")
	}
}
