package adminclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/adminclient"
	"github.com/example/waitingroom/internal/testing/sigv4test"
)

var creds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

// echo answers a program whose id is the path's last segment, and records
// the last request's body.
type echo struct{ lastBody string }

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	e.lastBody = string(b)
	id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	status := http.StatusOK
	if r.Method == http.MethodPut {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"programId": id, "issued": 7, "admissionRatePerSecond": 2.5, "notice": "hi", "futureField": true})
}

// signedServer is an API that verifies SigV4 for region in front of echo.
func signedServer(t *testing.T, region string, c aws.Credentials) (*httptest.Server, *echo) {
	t.Helper()
	e := &echo{}
	srv := httptest.NewServer(sigv4test.Gateway(c, region, "", e))
	t.Cleanup(srv.Close)
	return srv, e
}

func newClient(t *testing.T, url string, auth adminclient.Authorizer, hc *http.Client) *adminclient.Client {
	t.Helper()
	c, err := adminclient.New(url, auth, hc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSigV4(t *testing.T) {
	ctx := context.Background()
	withToken := creds
	withToken.SessionToken = "FwoGZXIvYXdzEXAMPLE"
	for _, c := range []aws.Credentials{creds, withToken} {
		srv, e := signedServer(t, "eu-west-1", c)
		client := newClient(t, srv.URL, adminclient.SigV4{
			Credentials: credentials.StaticCredentialsProvider{Value: c},
			Region:      "eu-west-1",
		}, nil)
		p, err := client.Program(ctx, "gala")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		if p.ProgramID != "gala" || p.Issued != 7 || p.AdmissionRatePerSecond != 2.5 || p.Notice != "hi" {
			t.Errorf("program %+v", p)
		}
		if !strings.Contains(string(p.Raw), `"futureField":true`) {
			t.Errorf("Raw lost a field the client does not know: %s", p.Raw)
		}
		// A body is part of the signature (its payload hash).
		_, created, err := client.PutProgram(ctx, "gala", adminclient.Settings{"paused": true, "admissionRatePerSecond": 5})
		if err != nil || !created {
			t.Fatalf("PUT: created %v, %v", created, err)
		}
		if e.lastBody != `{"admissionRatePerSecond":5,"paused":true}` {
			t.Errorf("PUT body %s", e.lastBody)
		}
		if _, err := client.Admit(ctx, "gala", 3); err != nil || e.lastBody != `{"count":3}` {
			t.Errorf("POST: %v, body %s", err, e.lastBody)
		}
	}
}

// tamper changes a request after it was signed.
type tamper func(*http.Request)

func (f tamper) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSigV4Rejected(t *testing.T) {
	ctx := context.Background()
	srv, _ := signedServer(t, "eu-west-1", creds)
	wrongSecret := creds
	wrongSecret.SecretAccessKey = "not-the-secret"
	signer := func(c aws.Credentials, region string) adminclient.SigV4 {
		return adminclient.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: c}, Region: region}
	}
	for _, tc := range []struct {
		name string
		auth adminclient.Authorizer
		rt   http.RoundTripper
		want string
	}{
		{"Unsigned", adminclient.BearerToken("x"), nil, "algorithm"},
		{"WrongSecret", signer(wrongSecret, "eu-west-1"), nil, "signature does not match"},
		{"WrongRegion", signer(creds, "us-east-1"), nil, "in us-east-1"},
		{"Stale", adminclient.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: creds}, Region: "eu-west-1",
			Now: func() time.Time { return time.Now().Add(-time.Hour) }}, nil, "from now"},
		{"TamperedBody", signer(creds, "eu-west-1"), tamper(func(r *http.Request) {
			b := []byte(`{"admissionRatePerSecond":9,"paused":true}`) // same length, other rate
			r.Body = io.NopCloser(bytes.NewReader(b))
		}), "signature does not match"},
		{"TamperedPath", signer(creds, "eu-west-1"), tamper(func(r *http.Request) {
			r.URL.Path = strings.Replace(r.URL.Path, "gala", "fair", 1)
		}), "signature does not match"},
		{"TamperedHeader", signer(creds, "eu-west-1"), tamper(func(r *http.Request) {
			r.Header.Set("Content-Type", "text/plain")
		}), "signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, srv.URL, tc.auth, &http.Client{Transport: tc.rt})
			_, _, err := client.PutProgram(ctx, "gala", adminclient.Settings{"paused": true, "admissionRatePerSecond": 5})
			var ae *adminclient.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "" || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("err = %v, want a 403 from the gateway saying %q", err, tc.want)
			}
		})
	}
}

func TestSigV4NoCredentials(t *testing.T) {
	client := newClient(t, "https://abc.execute-api.eu-west-1.amazonaws.com", adminclient.SigV4{
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		}),
		Region: "eu-west-1",
	}, nil)
	_, err := client.Program(context.Background(), "gala")
	if err == nil || !strings.Contains(err.Error(), "AWS credentials: no EC2 IMDS role found") {
		t.Errorf("err = %v", err)
	}
}

func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/admin/programs/busy":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"code":"STORE_UNAVAILABLE","message":"The queue is briefly unavailable; retry shortly."}`)
		case "/api/v1/admin/programs/html":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `<html>bad gateway</html>`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`)
		}
	}))
	defer srv.Close()
	client := newClient(t, srv.URL+"/", adminclient.BearerToken("s"), nil)
	for id, want := range map[string]adminclient.Error{
		"busy": {Status: 503, Code: "STORE_UNAVAILABLE", Message: "The queue is briefly unavailable; retry shortly.", RetryAfter: 2 * time.Second},
		"html": {Status: 502, Message: "Bad Gateway"},
		"gone": {Status: 404, Code: "PROGRAM_NOT_FOUND", Message: "No such program."},
	} {
		_, err := client.Program(context.Background(), id)
		var ae *adminclient.Error
		if !errors.As(err, &ae) {
			t.Fatalf("%s: err = %v, want an *Error", id, err)
		}
		if diff := cmp.Diff(want, *ae); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:3000", "ftp://x", "http://", "http://x/?q=1"} {
		if _, err := adminclient.New(bad, adminclient.BearerToken("s"), nil); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, err := adminclient.New("http://x", nil, nil); err == nil {
		t.Error("New without an Authorizer accepted")
	}
}

func TestBasePath(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.EscapedPath()
		_, _ = io.WriteString(w, `{"programId":"x"}`)
	}))
	defer srv.Close()
	client := newClient(t, srv.URL+"/stage/", adminclient.BearerToken("s"), nil)
	if _, err := client.Program(context.Background(), "a b"); err != nil {
		t.Fatal(err)
	}
	if got != "/stage/api/v1/admin/programs/a%20b" {
		t.Errorf("path %q", got)
	}
}

func TestRegionFromHost(t *testing.T) {
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":         "eu-west-1",
		"ABC123.execute-api.us-east-1.amazonaws.com:443":     "us-east-1",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn":     "cn-north-1",
		"queue.example.com":                                  "",
		"127.0.0.1:3000":                                     "",
		"abc123.execute-api.eu-west-1.amazonaws.com.evil.io": "",
	} {
		got, ok := adminclient.RegionFromHost(host)
		if got != want || ok != (want != "") {
			t.Errorf("RegionFromHost(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}

func TestProgramJSON(t *testing.T) {
	var p adminclient.Program
	err := json.Unmarshal([]byte(`{"programId":"gala","issued":3,"createdAt":"2026-12-01T09:00:00.000Z","opensAt":"2026-12-01T10:00:00+09:00","effectiveAt":"","shuffleAtOpen":true,"unknown":[1]}`), &p)
	if err != nil {
		t.Fatal(err)
	}
	want := adminclient.Program{ProgramID: "gala", Issued: 3, ShuffleAtOpen: true,
		CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), OpensAt: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, p, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := json.Unmarshal([]byte(`{"opensAt":"tomorrow"}`), &p); err == nil || !strings.Contains(err.Error(), "opensAt") {
		t.Errorf("a malformed time: %v", err)
	}
}
