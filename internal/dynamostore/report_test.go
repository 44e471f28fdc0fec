package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/testing/dynamotest"
)

// checkAttrs compares the named attributes of item with want (see attrString).
func checkAttrs(t *testing.T, what string, item map[string]types.AttributeValue, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for name := range want {
		got[name] = attrString(item[name])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// TestReportItems: a minute's item holds its non-zero counters and flush
// ids, a kept report its gzipped JSON, a token what its enter answered and
// where it left.
func TestReportItems(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client := newClient(t)
	table := dynamotest.NewTable(t, client)
	s := dynamostore.New(client, table)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // 1772366400 s, minute 29539440

	m := report.Minute{At: t0, Requests: 4, Answers: 2, EstimatesMs: 90_000}
	m.PerSecond[17] = 3
	for _, flush := range []string{"i-1#1", "i-2#1", "i-1#1"} {
		if err := s.AddMinute(ctx, "sale", flush, m); err != nil {
			t.Fatalf("AddMinute %s: %v", flush, err)
		}
	}
	checkItem(t, rawItem(t, client, table, "REPORT#sale", "MIN#0029539440"), map[string]string{
		"pk": "S:REPORT#sale", "sk": "S:MIN#0029539440", "programId": "S:sale",
		"atMs": "N:1772366400000", "ttl": "N:1806926400", // 400 days on
		"flushes":  "SS:[i-1#1 i-2#1]",
		"requests": "N:8", "answers": "N:4", "estimatesMs": "N:180000", "s17": "N:6",
	})

	r := report.Report{ProgramID: "sale", MadeAt: t0.Add(time.Hour + 5*time.Millisecond), Final: true}
	if err := s.PutReport(ctx, r); err != nil {
		t.Fatalf("PutReport: %v", err)
	}
	item := rawItem(t, client, table, "REPORT#sale", "REPORT")
	checkAttrs(t, "report item", item, map[string]string{"madeAtMs": "N:1772370000005", "final": "BOOL:true", "ttl": "N:1806930001"})
	if b, ok := item["report"].(*types.AttributeValueMemberB); !ok || len(b.Value) < 2 || b.Value[0] != 0x1f || b.Value[1] != 0x8b {
		t.Errorf("report attribute %v, want gzip bytes", item["report"])
	}

	tok := queue.Token{ID: queue.NewTokenID(), ProgramID: "sale", Ticket: 9, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour),
		EnterPosition: 12, EnterEstimate: 90*time.Second + 5*time.Millisecond}
	if err := s.PutToken(ctx, tok); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
	checkAttrs(t, "token item", rawItem(t, client, table, "TOKEN#"+tok.ID, "TOKEN"),
		map[string]string{"enterPos": "N:12", "enterEstMs": "N:90005", "leftPos": "", "leftEstMs": ""})
	tok.LeftAt, tok.LeftPosition, tok.LeftEstimate = t0.Add(time.Minute), 3, 20*time.Second
	if _, err := s.MarkLeft(ctx, tok); err != nil {
		t.Fatalf("MarkLeft: %v", err)
	}
	checkAttrs(t, "token item after MarkLeft", rawItem(t, client, table, "TOKEN#"+tok.ID, "TOKEN"),
		map[string]string{"enterPos": "N:12", "enterEstMs": "N:90005", "leftPos": "N:3", "leftEstMs": "N:20000", "leftAt": "N:1772366460000"})
}

// TestReportWritesAnswerLost: a minute's write applied with its answer lost
// counts once on the SDK's retry, and MarkLeft's answers the token as left.
func TestReportWritesAnswerLost(t *testing.T) {
	t.Parallel()
	r, s := newStoreRig(t, "lost")
	ctx := t.Context()
	m := report.Minute{At: t0, Requests: 5, Polls: 4}
	m.PerSecond[0] = 5
	r.loseFirst("UpdateItem", `"flushes"`)
	if err := s.AddMinute(ctx, "lost", "i-1#7", m); err != nil {
		t.Fatalf("AddMinute: %v", err)
	}
	r.checkLost(t, "UpdateItem", "add minute")
	if got, err := s.Minutes(ctx, "lost"); err != nil || !cmp.Equal(got, []report.Minute{m}) {
		t.Fatalf("Minutes: %+v %v, want %+v once", got, err, m)
	}

	tok := queue.Token{ID: queue.NewTokenID(), ProgramID: "lost", Ticket: 1, IssuedAt: t0, EnterPosition: 1, EnterEstimate: time.Second}
	if err := s.PutToken(ctx, tok); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
	tok.LeftAt, tok.LeftPosition, tok.LeftEstimate = t0.Add(time.Minute), 1, 500*time.Millisecond
	r.loseFirst("UpdateItem", `"leftPos"`)
	got, err := s.MarkLeft(ctx, tok)
	r.checkLost(t, "UpdateItem", "mark left")
	if err != nil || !cmp.Equal(got, tok) {
		t.Fatalf("MarkLeft: %+v %v, want %+v", got, err, tok)
	}
}
