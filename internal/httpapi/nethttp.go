package httpapi

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ServeHTTP lets the local server run the Lambda handler behind net/http: it
// shapes r as API Gateway would (payload format 2.0: lower-case header names,
// repeated headers joined by commas, a request id) and writes Handle's
// answer back.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	req := toEvent(r, body)
	var resp events.APIGatewayV2HTTPResponse
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		resp = h.errorResponse(r.Context(), req, errTooLarge)
	case err != nil:
		resp = h.errorResponse(r.Context(), req, &apiError{http.StatusBadRequest, "INVALID_BODY", "The request body could not be read."})
	default:
		resp, _ = h.Handle(r.Context(), req)
	}
	writeResponse(w, resp)
}

func toEvent(r *http.Request, body []byte) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header))
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	now := time.Now()
	return events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "$default",
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        headers,
		Body:           string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: hex.EncodeToString(id[:]),
			Stage:     "$default",
			Time:      now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  ip,
				UserAgent: r.UserAgent(),
			},
		},
	}
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	_, _ = w.Write(body)
}
