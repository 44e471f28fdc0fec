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
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
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
