package localkvs_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	kvs "github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore"
	"github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/tools/localkvs"
)

// start serves an empty store on loopback and returns the SDK's client of it.
func start(t *testing.T) (*localkvs.Server, *kvs.Client, *httptest.Server) {
	t.Helper()
	emu := localkvs.New("")
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	return emu, edgekv.NewAPI(cfg, srv.URL), srv
}

func describe(t *testing.T, c *kvs.Client, arn string) *kvs.DescribeKeyValueStoreOutput {
	t.Helper()
	out, err := c.DescribeKeyValueStore(t.Context(), &kvs.DescribeKeyValueStoreInput{KvsARN: &arn})
	if err != nil {
		t.Fatalf("DescribeKeyValueStore: %v", err)
	}
	return out
}

// status returns the HTTP status of an API error.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestETagChangesWithEveryChange(t *testing.T) {
	emu, c, _ := start(t)
	ctx, arn := t.Context(), aws.String(emu.ARN())
	seen := map[string]bool{}
	etag := func(what, got string) {
		t.Helper()
		if got != emu.ETag() || seen[got] {
			t.Fatalf("%s: ETag %q, store's %q, seen before: %v", what, got, emu.ETag(), seen[got])
		}
		seen[got] = true
	}
	d := describe(t, c, emu.ARN())
	etag("empty store", aws.ToString(d.ETag))
	if aws.ToString(d.Status) != "READY" || aws.ToString(d.KvsARN) != emu.ARN() {
		t.Errorf("DescribeKeyValueStore: %+v", d)
	}

	put, err := c.PutKey(ctx, &kvs.PutKeyInput{KvsARN: arn, Key: aws.String("k"), Value: aws.String("v1"), IfMatch: d.ETag})
	if err != nil {
		t.Fatalf("PutKey: %v", err)
	}
	etag("PutKey", aws.ToString(put.ETag))
	if aws.ToInt32(put.ItemCount) != 1 || aws.ToInt64(put.TotalSizeInBytes) != 3 {
		t.Errorf("PutKey counts %d items of %d bytes, want 1 of 3", aws.ToInt32(put.ItemCount), aws.ToInt64(put.TotalSizeInBytes))
	}
	if _, err := c.GetKey(ctx, &kvs.GetKeyInput{KvsARN: arn, Key: aws.String("k")}); err != nil || emu.ETag() != aws.ToString(put.ETag) {
		t.Fatalf("GetKey: %v; ETag %q after a read, want %q", err, emu.ETag(), aws.ToString(put.ETag))
	}
	emu.Set("k", "v2")
	etag("Set", emu.ETag())
	put, err = c.PutKey(ctx, &kvs.PutKeyInput{KvsARN: arn, Key: aws.String("k"), Value: aws.String("v"), IfMatch: aws.String(emu.ETag())})
	if err != nil {
		t.Fatalf("PutKey over a key: %v", err)
	}
	etag("PutKey over a key", aws.ToString(put.ETag))
	if aws.ToInt32(put.ItemCount) != 1 || aws.ToInt64(put.TotalSizeInBytes) != 2 {
		t.Errorf("PutKey over a key counts %d items of %d bytes, want 1 of 2", aws.ToInt32(put.ItemCount), aws.ToInt64(put.TotalSizeInBytes))
	}
	if d := describe(t, c, emu.ARN()); aws.ToString(d.ETag) != emu.ETag() || aws.ToInt64(d.TotalSizeInBytes) != 2 {
		t.Errorf("DescribeKeyValueStore: ETag %q, want %q; %d bytes, want 2", aws.ToString(d.ETag), emu.ETag(), aws.ToInt64(d.TotalSizeInBytes))
	}
	if b := localkvs.New("").ETag(); seen[b] {
		t.Errorf("another store's ETag %q is one of this one's", b)
	}
}

// TestRefusals covers the writes the service refuses: nothing changes and the SDK returns the typed exception.
func TestRefusals(t *testing.T) {
	const stale = "stale"
	tests := []struct {
		name       string
		setup      func(*localkvs.Server)
		call       func(ctx context.Context, c *kvs.Client, arn, etag string) error
		wantStatus int
		wantErr    any // a pointer to the exception's type
	}{{
		name:       "PutKey stale If-Match",
		call:       putKey("k", "v", stale),
		wantStatus: http.StatusConflict, wantErr: new(*types.ConflictException),
	}, {
		name:       "key over 512 bytes",
		call:       putKey(strings.Repeat("k", localkvs.MaxKeyBytes+1), "v", ""),
		wantStatus: http.StatusBadRequest, wantErr: new(*types.ValidationException),
	}, {
		name:       "value over 1 KB",
		call:       putKey("k", strings.Repeat("v", localkvs.MaxValueBytes+1), ""),
		wantStatus: http.StatusBadRequest, wantErr: new(*types.ValidationException),
	}, {
		name: "store over 5 MB",
		setup: func(s *localkvs.Server) {
			s.Set("big", strings.Repeat("x", localkvs.MaxTotalBytes-len("big")-len("a1")))
		},
		call:       putKey("k", "v", ""),
		wantStatus: http.StatusPaymentRequired, wantErr: new(*types.ServiceQuotaExceededException),
	}, {
		name: "another store",
		call: func(ctx context.Context, c *kvs.Client, _, etag string) error {
			return putKey("k", "v", etag)(ctx, c, "arn:aws:cloudfront::123456789012:key-value-store/other", etag)
		},
		wantStatus: http.StatusNotFound, wantErr: new(*types.ResourceNotFoundException),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emu, c, _ := start(t)
			emu.Set("a", "1")
			if tt.setup != nil {
				tt.setup(emu)
			}
			etag := emu.ETag()
			err := tt.call(t.Context(), c, emu.ARN(), etag)
			if !errors.As(err, tt.wantErr) || status(err) != tt.wantStatus {
				t.Fatalf("got %v (HTTP %d), want %T (HTTP %d)", err, status(err), tt.wantErr, tt.wantStatus)
			}
			if v, ok := emu.Get("a"); emu.ETag() != etag || !ok || v != "1" {
				t.Errorf("the store changed: ETag %q (was %q), a = %q, %v", emu.ETag(), etag, v, ok)
			}
			for _, k := range []string{"k", "b"} {
				if _, ok := emu.Get(k); ok {
					t.Errorf("key %q was written", k)
				}
			}
		})
	}
}

// putKey is a PutKey of key and value under etag ("": the store's).
func putKey(key, value, etag string) func(context.Context, *kvs.Client, string, string) error {
	return func(ctx context.Context, c *kvs.Client, arn, current string) error {
		if etag == "" {
			etag = current
		}
		_, err := c.PutKey(ctx, &kvs.PutKeyInput{KvsARN: &arn, Key: &key, Value: &value, IfMatch: &etag})
		return err
	}
}

func TestGet(t *testing.T) {
	emu, c, _ := start(t)
	var reader interface{ Get(string) (string, bool) } = emu // the edge runtime's in-process read
	if err := putKey("keys", `{"current":{}}`, "")(t.Context(), c, emu.ARN(), emu.ETag()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, want string
		ok        bool
	}{{"keys", `{"current":{}}`, true}, {"site", "", false}}
	for _, tt := range tests {
		if v, ok := reader.Get(tt.key); v != tt.want || ok != tt.ok {
			t.Errorf("Get(%q) = %q, %v; want %q, %v", tt.key, v, ok, tt.want, tt.ok)
		}
	}
	_, err := c.GetKey(t.Context(), &kvs.GetKeyInput{KvsARN: aws.String(emu.ARN()), Key: aws.String("site")})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) || status(err) != http.StatusNotFound {
		t.Errorf("GetKey of a missing key: %v, want a ResourceNotFoundException", err)
	}
}

func TestFailPut(t *testing.T) {
	emu, c, _ := start(t)
	emu.FailPut(2)
	var got []bool
	for range 3 {
		err := putKey("k", "v", "")(t.Context(), c, emu.ARN(), emu.ETag())
		var ce *types.ConflictException
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("PutKey: %v", err)
		}
		got = append(got, err == nil)
	}
	if diff := cmp.Diff([]bool{true, false, true}, got); diff != "" {
		t.Errorf("PutKey succeeded (-want +got):\n%s", diff)
	}
}

func TestSigV4AOnly(t *testing.T) {
	emu, _, srv := start(t)
	for _, auth := range []string{"", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/cloudfront-keyvaluestore/aws4_request, SignedHeaders=host, Signature=00"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/key-value-stores/"+url.PathEscape(emu.ARN()), nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" {
			t.Errorf("Authorization %q: HTTP %d %s, want 403 AccessDeniedException", auth, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
		}
	}
}

// The operations edgekv does not call are not served.
func TestUnknownOperation(t *testing.T) {
	emu, c, _ := start(t)
	emu.Set("a", "1")
	_, err := c.ListKeys(t.Context(), &kvs.ListKeysInput{KvsARN: aws.String(emu.ARN())})
	if status(err) != http.StatusNotFound || !strings.Contains(err.Error(), "UnknownOperationException") {
		t.Errorf("ListKeys: %v, want an UnknownOperationException", err)
	}
	_, err = c.DeleteKey(t.Context(), &kvs.DeleteKeyInput{KvsARN: aws.String(emu.ARN()), Key: aws.String("a"), IfMatch: aws.String(emu.ETag())})
	if _, ok := emu.Get("a"); status(err) != http.StatusNotFound || !ok {
		t.Errorf("DeleteKey: %v, key still there: %v; want an UnknownOperationException", err, ok)
	}
}
