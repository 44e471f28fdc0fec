package bench_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
)

const benchSecret = "secret"

// pollSetup returns a handler over the embedded store whose program
// "bench" holds a paused queue of n tokens, and their ids.
func pollSetup(b *testing.B, n int, cache time.Duration) (http.Handler, []string) {
	b.Helper()
	ctx := context.Background()
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithProgramCache(cache))
	paused := true
	if _, _, err := svc.PutProgram(ctx, "bench", api.ProgramSettings{Paused: &paused}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		v, _, err := svc.Enter(ctx, "bench", queue.Entry{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = v.TokenID
	}
	return httpapi.New(svc, httpapi.BearerAuth(benchSecret)), ids
}

func pollEvent(token string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "$default",
		RawPath:  "/api/v1/queues/programs/bench",
		Headers:  map[string]string{"x-queue-token": token},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "bench",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodGet, Path: "/api/v1/queues/programs/bench"},
		},
	}
}

// BenchmarkPoll measures the poll path as Lambda runs it: the handler
// behind the API Gateway v2 adapter (httpapi.Lambda) on an event, over the embedded store, on a paused queue
// of 10,000 tokens polled in turn; without and with the per-instance
// program cache (PROGRAM_CACHE_TTL, 1 s by default).
func BenchmarkPoll(b *testing.B) {
	for _, cache := range []time.Duration{0, time.Second} {
		b.Run("cache="+cache.String(), func(b *testing.B) {
			h, ids := pollSetup(b, 10000, cache)
			invoke := httpapi.Lambda(h)
			reqs := make([]events.APIGatewayV2HTTPRequest, len(ids))
			for i, id := range ids {
				reqs[i] = pollEvent(id)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				resp, _ := invoke(ctx, reqs[i%len(reqs)])
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
				}
				i++
			}
		})
	}
}

// BenchmarkPollHTTP is the same poll through ServeHTTP, as the local
// server answers it (no network: an httptest recorder).
func BenchmarkPollHTTP(b *testing.B) {
	h, ids := pollSetup(b, 10000, time.Second)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/queues/programs/bench", nil)
		r.Header.Set("X-Queue-Token", ids[i%len(ids)])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		i++
	}
}

// BenchmarkPollTranslated is BenchmarkPoll's cached case on a program
// with a notice in 10 languages, polled with a browser's Accept-Language
// (ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7), or with ?lang=ko as the page
// polls: the cost of choosing the notice.
func BenchmarkPollTranslated(b *testing.B) {
	ctx := context.Background()
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithProgramCache(time.Second))
	texts := map[string]api.TextSettings{}
	for _, lang := range []string{"ko", "ja", "zh-Hant", "zh-Hans", "fr", "de", "es", "pt-BR", "it", "en-GB"} {
		texts[lang] = api.TextSettings{Notice: new("notice in " + lang)}
	}
	if _, _, err := svc.PutProgram(ctx, "bench", api.ProgramSettings{Paused: new(true), Notice: new("notice"), Translations: texts}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 10000)
	for i := range ids {
		v, _, err := svc.Enter(ctx, "bench", queue.Entry{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = v.TokenID
	}
	invoke := httpapi.Lambda(httpapi.New(svc, httpapi.BearerAuth(benchSecret)))
	for _, tc := range []struct{ name, query, acceptLanguage string }{
		{"accept-language", "", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"},
		{"lang", "lang=ko", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reqs := make([]events.APIGatewayV2HTTPRequest, len(ids))
			for i, id := range ids {
				reqs[i] = pollEvent(id)
				reqs[i].RawQueryString = tc.query
				if tc.acceptLanguage != "" {
					reqs[i].Headers["accept-language"] = tc.acceptLanguage
				}
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				resp, _ := invoke(ctx, reqs[i%len(reqs)])
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
				}
				i++
			}
		})
	}
}
