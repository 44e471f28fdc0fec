package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Authorizer adds credentials to a request about to be sent with payload.
type Authorizer interface {
	Authorize(ctx context.Context, req *http.Request, payload []byte) error
}

// BearerToken authorizes with "Authorization: Bearer <token>", only over
// https or to a loopback host (BearerSafe).
type BearerToken string

// Authorize sets the Authorization header, or refuses an unsafe URL.
func (t BearerToken) Authorize(_ context.Context, req *http.Request, _ []byte) error {
	if err := BearerSafe(req.URL); err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(t))
	return nil
}

// BearerSafe returns an error unless u is https or names a loopback host.
func BearerSafe(u *url.URL) error {
	if u.Scheme == "https" || Loopback(u.Host) {
		return nil
	}
	return fmt.Errorf("a bearer token goes only over https or to a loopback host (localhost, 127.0.0.0/8, ::1), not to %s://%s", u.Scheme, u.Host)
}

// Loopback reports whether host (with or without a port) is localhost or a loopback address.
func Loopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Service is the SigV4 signing name of API Gateway's APIs.
const Service = "execute-api"

// SigV4 signs requests with AWS Signature Version 4 for API Gateway's IAM
// authorizer, for Region at Now (nil: time.Now).
type SigV4 struct {
	Credentials aws.CredentialsProvider
	Region      string
	Now         func() time.Time
}

// Authorize signs req and payload, after every other header is set.
func (s SigV4) Authorize(ctx context.Context, req *http.Request, payload []byte) error {
	if s.Credentials == nil {
		return fmt.Errorf("sign the request: no AWS credentials")
	}
	if s.Region == "" {
		return fmt.Errorf("sign the request: no AWS region")
	}
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("sign the request: AWS credentials: %w", err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	sum := sha256.Sum256(payload)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), Service, s.Region, now()); err != nil {
		return fmt.Errorf("sign the request: %w", err)
	}
	return nil
}

// apiHost matches an API Gateway default endpoint.
var apiHost = regexp.MustCompile(`^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// RegionFromHost returns the region of an API Gateway default endpoint host
// (with or without a port); false for any other host.
func RegionFromHost(host string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m := apiHost.FindStringSubmatch(strings.ToLower(host))
	if m == nil {
		return "", false
	}
	return m[1], true
}
