package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/felixge/httpsnoop"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/history"
)

// LocalActor is the actor of the admin changes made with the bearer secret.
const LocalActor = "local-admin"

// BearerAuth admits requests bearing "Authorization: Bearer <secret>"
// (compared in constant time) as LocalActor: the local server's admin auth.
func BearerAuth(secret string) Middleware {
	want := sha256.Sum256([]byte(secret))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := strings.TrimSpace(r.Header.Get("Authorization"))
			scheme, got, ok := strings.Cut(auth, " ")
			sum := sha256.Sum256([]byte(got))
			switch {
			case auth == "":
				writeClientError(w, r, errNeedsBearer)
			case !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1:
				writeClientError(w, r, errBadBearer)
			default:
				next.ServeHTTP(w, r.WithContext(history.WithActor(r.Context(), LocalActor)))
			}
		})
	}
}

// IAMAuth admits requests that API Gateway's AWS_IAM authorizer let through, with the
// caller's IAM ARN as their actor: a second lock behind API Gateway's.
func IAMAuth() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
			if a := rc.Authorizer; !ok || a == nil || a.IAM == nil || a.IAM.UserARN == "" && a.IAM.CallerID == "" {
				writeClientError(w, r, errNeedsIAM)
				return
			}
			iam := rc.Authorizer.IAM
			next.ServeHTTP(w, r.WithContext(history.WithActor(r.Context(), cmp.Or(iam.UserARN, "caller:"+iam.CallerID))))
		})
	}
}

// passIssuer names https://<API Gateway's domainName>, never the Host header, as the
// issuer of the passes signed for the request (when no PASS_ISSUER is set).
func passIssuer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok && dnsName.MatchString(rc.DomainName) {
			r = r.WithContext(admissionpass.WithIssuer(r.Context(), "https://"+rc.DomainName))
		}
		next.ServeHTTP(w, r)
	})
}

// dnsName matches a DNS name, as API Gateway's domainName always is.
var dnsName = regexp.MustCompile(`^[A-Za-z0-9.-]{1,253}$`)

type requestIDKey struct{}

// requestID is the id logRequests gave the request.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// logRequests gives each request an id (API Gateway's, or a random one) and logs it at
// debug level once answered, never with its token.
func (a *api) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc, _ := core.GetAPIGatewayV2ContextFromContext(r.Context())
		id := cmp.Or(rc.RequestID, rand.Text())
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		m := httpsnoop.CaptureMetrics(next, w, r.WithContext(ctx))
		a.log.LogAttrs(ctx, slog.LevelDebug, "request", slog.String("requestId", id), slog.String("method", r.Method),
			slog.String("path", r.URL.EscapedPath()), slog.Int("status", m.Code), slog.Duration("duration", m.Duration))
	})
}

// recoverPanics answers a panic with the API's 500 and logs it.
func (a *api) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m httpsnoop.Metrics // Code and Written stay 0 until the handler writes
		defer func() {
			switch v := recover(); v {
			case nil:
			case http.ErrAbortHandler:
				panic(v)
			default:
				a.log.ErrorContext(r.Context(), "panic", "requestId", requestID(r.Context()), "panic", fmt.Sprint(v))
				if m.Code == 0 && m.Written == 0 {
					a.writeError(w, r, errInternal)
				}
			}
		}()
		m.CaptureMetrics(w, func(w http.ResponseWriter) { next.ServeHTTP(w, r) })
	})
}

// screen answers 431 to a request whose line and headers, as sent, are
// over MaxHeaderBytes, 404 to a path not in canonical form (where ServeMux
// would redirect) and 413 to a body announced over MaxBodyBytes; it cuts
// any other body at the limit (reading past it fails with *http.MaxBytesError).
func screen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		clean := path.Clean("/" + p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		switch {
		case headerBytes(r) > MaxHeaderBytes:
			writeClientError(w, r, errHeadersBig)
		case p != clean:
			writeClientError(w, r, errNoRoute)
		case r.ContentLength > MaxBodyBytes:
			w.Header().Set("Connection", "close") // the body stays unread
			writeClientError(w, r, errTooLarge)
		default:
			if r.Body == nil { // a server's request always has one; a handler called directly may not
				r.Body = http.NoBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
			next.ServeHTTP(w, r)
		}
	})
}

// headerBytes is the size of r's request line and header fields (Host included) as
// sent over HTTP/1.1, with the blank line that ends them.
func headerBytes(r *http.Request) int {
	uri := cmp.Or(r.RequestURI, r.URL.RequestURI())
	n := len(r.Method) + 1 + len(uri) + len(" HTTP/1.1\r\n") + len("\r\n")
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + len("\r\n")
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
