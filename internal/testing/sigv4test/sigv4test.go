// Package sigv4test checks AWS Signature Version 4 on requests as API
// Gateway's IAM authorizer would, by signing them again with the SDK's signer.
package sigv4test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxSkew is how far the signing time may be from now, as on AWS.
const MaxSkew = 5 * time.Minute

// Verify checks r's signature (body is r's body, already read) for service
// and region against creds.
func Verify(r *http.Request, body []byte, creds aws.Credentials, service, region string) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errors.New("missing Authorization header")
	}
	algo, rest, _ := strings.Cut(auth, " ")
	if algo != "AWS4-HMAC-SHA256" {
		return fmt.Errorf("algorithm %q, want AWS4-HMAC-SHA256", algo)
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q is malformed", fields["Credential"])
	}
	if scope[0] != creds.AccessKeyID {
		return fmt.Errorf("unknown access key %q", scope[0])
	}
	if scope[2] != region || scope[3] != service {
		return fmt.Errorf("signed for %s in %s, want %s in %s", scope[3], scope[2], service, region)
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %w", r.Header.Get("X-Amz-Date"), err)
	}
	if d := time.Since(when); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("signed at %s, more than %s from now", when, MaxSkew)
	}
	if scope[1] != when.Format("20060102") {
		return fmt.Errorf("scope date %s is not the signing date %s", scope[1], when.Format("20060102"))
	}
	if creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return errors.New("missing or wrong X-Amz-Security-Token")
	}

	// The request as signed: the same method, host, path, query and signed headers.
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	again.Host = r.Host
	again.ContentLength = int64(len(body))
	for name := range strings.SplitSeq(fields["SignedHeaders"], ";") {
		switch name {
		case "host", "content-length":
			continue
		}
		vs, ok := r.Header[http.CanonicalHeaderKey(name)]
		if !ok {
			return fmt.Errorf("signed header %q is not in the request", name)
		}
		again.Header[http.CanonicalHeaderKey(name)] = vs
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), service, region, when); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(again.Header.Get("Authorization")), []byte(auth)) != 1 {
		return errors.New("the request signature does not match")
	}
	return nil
}

// Gateway stands in for the authorizer: it passes to next the requests signed
// with creds for execute-api in region, their Authorization replaced by forward
// (removed for ""), and answers the others 403 {"message"} as API Gateway does.
func Gateway(creds aws.Credentials, region, forward string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = Verify(r, body, creds, "execute-api", region)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "Forbidden: " + err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Header.Del("Authorization")
		if forward != "" {
			r.Header.Set("Authorization", forward)
		}
		next.ServeHTTP(w, r)
	})
}
