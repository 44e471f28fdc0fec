package dynamostore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/faultinject"
	"github.com/example/waitingroom/internal/testing/queuetest"
)

// TestIdempotencyKeyParallel: 16 enters in parallel with one
// Idempotency-Key, or with enqueue tokens of one account, through two
// instances, take one ticket between them and all answer its token;
// repeated for several keys, the program issued one ticket per key (issue
// 16: 12 rounds had issued 127). In each round all 16 find the key
// unclaimed, one claims it, and the 15 others wait for its token on the
// instances' clock until it is filled.
func TestIdempotencyKeyParallel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		entry func(k int) queue.Entry
	}{
		{"Key", func(k int) queue.Entry {
			return queue.Entry{IdempotencyKey: fmt.Sprintf("parallel-retries-key-%04d", k)}
		}},
		{"Account", func(k int) queue.Entry { return queue.Entry{Enqueue: fmt.Sprintf("account:user-%d", k)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const keys, parallel = 12, 16
			endpoint := dynamotest.Lease(t)
			clk := clocktest.NewManual(t0)
			var rounds queuetest.KeyedEnters
			svcs := make([]*queue.Service, 2)
			var table string
			for i := range svcs {
				c := newClientAt(t, endpoint) // one client per instance, as each Lambda instance has its own
				if i == 0 {
					table = dynamotest.NewTable(t, c)
				}
				svcs[i] = queue.NewService(rounds.Wrap(dynamostore.New(c, table)), polling.DefaultTiers(), queue.WithClock(clk),
					queue.WithEnqueue(queuetest.Accounts{}), queue.WithChallengeSecret([]byte("one secret for both instances")))
			}
			paused := true
			if _, _, err := svcs[0].PutProgram(t.Context(), "rush", queuetest.TakingAccounts(api.ProgramSettings{Paused: &paused})); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			rounds.Collide(t, svcs, clk, "rush", keys, parallel, tc.entry)
			c, err := svcs[0].Program(ctx, "rush")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d keys × %d parallel enters: %d tickets issued", keys, parallel, c.Issued)
			if c.Issued != keys {
				t.Errorf("%d keys, %d enters each in parallel, issued %d tickets; want %d (one per key)", keys, parallel, c.Issued, keys)
			}
		})
	}
}

// TestFaultsLostClaimAnswers: the claim's write, or the fill's, is applied
// but its answer is lost, and the SDK sends it again. The retry fails its
// condition on the enter's own claim or token, which the enter recognises
// (by the claim id, by the ticket): it gets its place at once, with one
// ticket.
func TestFaultsLostClaimAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string // what only that PutItem's body holds
		entry      queue.Entry
	}{
		{"Claim", `"claimMs"`, queue.Entry{IdempotencyKey: "lost-answer-key-claim"}},
		{"Fill", `"issuedAt"`, queue.Entry{IdempotencyKey: "lost-answer-key-fill"}},
		{"AccountClaim", `"claimMs"`, queue.Entry{Enqueue: "account:alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFaultRig(t, queue.WithEnqueue(queuetest.Accounts{}))
			id := strings.ToLower(tc.name)
			paused := true
			if _, _, err := r.svc.PutProgram(t.Context(), id, queuetest.TakingAccounts(api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(10)), Paused: &paused})); err != nil {
				t.Fatal(err)
			}
			r.ft.SetRules(faultinject.Rule{Op: "PutItem", BodyContains: tc.body, Count: 1, Action: faultinject.DropResponse})
			v, created, err := r.svc.Enter(t.Context(), id, tc.entry)
			if err != nil || !created || v.Ticket != 1 {
				t.Fatalf("enter = %+v, created %v, %v; want ticket 1, created", v, created, err)
			}
			if r.ft.Faults("PutItem") != 1 || r.ft.Calls("PutItem") != 3 {
				t.Errorf("%d PutItem, %d answers lost; want 3 (claim, fill, the retry of the lost one) and 1", r.ft.Calls("PutItem"), r.ft.Faults("PutItem"))
			}
			r.ft.SetRules()
			again, created, err := r.svc.Enter(t.Context(), id, tc.entry)
			if err != nil || created || again.TokenID != v.TokenID {
				t.Errorf("retry = %+v, created %v, %v; want token %s", again, created, err, v.TokenID)
			}
			if c, err := r.svc.Program(t.Context(), id); err != nil || c.Issued != 1 {
				t.Errorf("issued %d (%v), want 1", c.Issued, err)
			}
		})
	}
}

// TestClaimItem: a claim is a token item with claimId, claimMs and a TTL
// and no ticket (TTL removes it if nobody fills it); its fill is the token
// item, without the claim's attributes.
func TestClaimItem(t *testing.T) {
	client := newClient(t)
	table := dynamotest.NewTable(t, client)
	s := dynamostore.New(client, table)
	at := time.Date(2026, 3, 1, 12, 0, 0, 5_000_000, time.UTC)
	id := queue.NewTokenID()
	c := queue.Token{ID: id, ProgramID: "gala", Claim: "claim-a", ClaimedAt: at, ExpiresAt: at.Add(time.Hour)}
	if _, err := s.ClaimToken(t.Context(), c, at.Add(-queue.ClaimTimeout)); err != nil {
		t.Fatal(err)
	}
	checkItem(t, rawItem(t, client, table, "TOKEN#"+id, "TOKEN"), map[string]string{
		"pk": "S:TOKEN#" + id, "sk": "S:TOKEN", "tokenId": "S:" + id, "programId": "S:gala",
		"claimId": "S:claim-a", "claimMs": "N:1772366400005", "ttl": "N:1772370001",
	})
	tok := queue.Token{ID: id, ProgramID: "gala", Ticket: 7, IssuedAt: at, ExpiresAt: at.Add(48 * time.Hour)}
	if _, err := s.FillToken(t.Context(), tok, "claim-a"); err != nil {
		t.Fatal(err)
	}
	checkItem(t, rawItem(t, client, table, "TOKEN#"+id, "TOKEN"), map[string]string{
		"pk": "S:TOKEN#" + id, "sk": "S:TOKEN", "tokenId": "S:" + id, "programId": "S:gala",
		"ticket": "N:7", "issuedAt": "N:1772366400005", "ttl": "N:1772539201",
	})
}
