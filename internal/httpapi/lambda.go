package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// LambdaHandler is what lambda.Start runs: an API Gateway HTTP API (payload 2.0) request in, its answer out.
type LambdaHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Lambda serves h to API Gateway through httpadapter.NewV2; an event the adapter cannot
// turn into a request gets the API's JSON 404 or 400, not Lambda's opaque 500.
func Lambda(h http.Handler) LambdaHandler {
	proxy := httpadapter.NewV2(h).ProxyWithContext
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if e := unconvertible(ev); e != nil {
			return eventAnswer(e), nil
		}
		resp, err := proxy(ctx, ev)
		if err != nil {
			return eventAnswer(errNoRoute), nil
		}
		return resp, nil
	}
}

// unconvertible returns the error for an ev whose body or URL the adapter cannot convert.
func unconvertible(ev events.APIGatewayV2HTTPRequest) *httpError {
	if ev.IsBase64Encoded {
		if _, err := base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return errUnreadable
		}
	}
	p := cmp.Or(ev.RawPath, ev.RequestContext.HTTP.Path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if ev.RawQueryString != "" {
		p += "?" + ev.RawQueryString
	}
	if _, err := url.Parse("https://" + ev.RequestContext.DomainName + p); err != nil {
		return errNoRoute
	}
	return nil
}

// eventAnswer is e as an API Gateway response.
func eventAnswer(e *httpError) events.APIGatewayV2HTTPResponse {
	w := core.NewProxyResponseWriterV2()
	writeClientError(w, nil, e)
	resp, _ := w.GetProxyResponse() // a status is set: no error
	return resp
}
