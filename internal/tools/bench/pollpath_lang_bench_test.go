package bench_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

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
