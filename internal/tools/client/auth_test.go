package client_test

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

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/sigv4test"
	"github.com/example/waitingroom/internal/tools/client"
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

func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pauseAtFive is the settings the signing tests send.
var pauseAtFive = api.ProgramSettings{Paused: new(true), AdmissionRatePerSecond: new(api.Rate(5))}

func TestSigV4(t *testing.T) {
	ctx := context.Background()
	withToken := creds
	withToken.SessionToken = "FwoGZXIvYXdzEXAMPLE"
	for _, c := range []aws.Credentials{creds, withToken} {
		srv, e := signedServer(t, "eu-west-1", c)
		cl := newClient(t, srv.URL, client.WithAuth(client.SigV4{
			Credentials: credentials.StaticCredentialsProvider{Value: c},
			Region:      "eu-west-1",
		}))
		p, err := cl.GetProgram(ctx, "gala")
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
		_, created, err := cl.PutProgram(ctx, "gala", pauseAtFive)
		if err != nil || !created {
			t.Fatalf("PUT: created %v, %v", created, err)
		}
		if e.lastBody != `{"admissionRatePerSecond":5,"paused":true}` {
			t.Errorf("PUT body %s", e.lastBody)
		}
		if _, err := cl.Admit(ctx, "gala", 3); err != nil || e.lastBody != `{"count":3}` {
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
	signer := func(c aws.Credentials, region string) client.SigV4 {
		return client.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: c}, Region: region}
	}
	for _, tc := range []struct {
		name string
		auth client.Authorizer
		rt   http.RoundTripper
		want string
	}{
		{"Unsigned", client.BearerToken("x"), nil, "algorithm"},
		{"WrongSecret", signer(wrongSecret, "eu-west-1"), nil, "signature does not match"},
		{"WrongRegion", signer(creds, "us-east-1"), nil, "in us-east-1"},
		{"Stale", client.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: creds}, Region: "eu-west-1",
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
			cl := newClient(t, srv.URL, client.WithAuth(tc.auth), client.WithHTTPClient(&http.Client{Transport: tc.rt}))
			_, _, err := cl.PutProgram(ctx, "gala", pauseAtFive)
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "" || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("err = %v, want a 403 from the gateway saying %q", err, tc.want)
			}
		})
	}
}

func TestSigV4NoCredentials(t *testing.T) {
	cl := newClient(t, "https://abc.execute-api.eu-west-1.amazonaws.com", client.WithAuth(client.SigV4{
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		}),
		Region: "eu-west-1",
	}))
	_, err := cl.GetProgram(context.Background(), "gala")
	if err == nil || !strings.Contains(err.Error(), "AWS credentials: no EC2 IMDS role found") {
		t.Errorf("err = %v", err)
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
		got, ok := client.RegionFromHost(host)
		if got != want || ok != (want != "") {
			t.Errorf("RegionFromHost(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}
