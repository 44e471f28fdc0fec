package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/enqueuetest"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/simclock"
)

func TestMain(m *testing.M) {
	dynamotest.Server = "dynalite" // locks items as DynamoDB does: the load test's races are real
	dynamotest.Main(m)
}

// newTable makes a fresh table on the test server (dynalite, or moto with
// DYNAMODB_TEST_SERVER=moto): its client, its name, and audit run on
// it with args, which returns the exit status, stdout and stderr.
func newTable(t *testing.T) (*dynamodb.Client, string, func(args ...string) (int, string, string)) {
	t.Helper()
	endpoint := dynamotest.Endpoint(t)
	client, err := dynamostore.NewClient(t.Context(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	table := dynamotest.NewTable(t, client)
	env := map[string]string{"DYNAMODB_ENDPOINT": endpoint, "TABLE_NAME": table}
	return client, table, func(args ...string) (int, string, string) {
		var out, errs strings.Builder
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errs)
		return code, out.String(), errs.String()
	}
}

// TestRunDynamo seeds a table through dynamostore, as the service writes
// it, and audits it through the DynamoDB API (dynalite, or moto with
// DYNAMODB_TEST_SERVER=moto).
func TestRunDynamo(t *testing.T) {
	ctx := t.Context()
	client, table, runAudit := newTable(t)
	store := dynamostore.New(client, table)
	now := time.Now()

	// issue creates a paused program and hands out n tickets.
	issue := func(id string, n int) {
		t.Helper()
		p := admission.Program{ID: id, CreatedAt: now, Version: 1, Current: pace.Segment{AnchorMs: now.UnixMilli(), Rate: pace.OnePerSecond, Paused: true}, Options: settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow}}
		if err := store.CreateProgram(ctx, p); err != nil {
			t.Fatalf("CreateProgram(%s): %v", id, err)
		}
		for range n {
			if _, err := store.IssueTicket(ctx, id, now); err != nil {
				t.Fatalf("IssueTicket(%s): %v", id, err)
			}
		}
	}
	put := func(id string, ticket int64) {
		t.Helper()
		tok := queue.Token{ID: queue.NewTokenID(), ProgramID: id, Ticket: ticket, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := store.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken(%s, %d): %v", id, ticket, err)
		}
	}
	// clean: tickets 1..3 held, 4 lost (its token write failed).
	issue("clean", 4)
	for _, n := range []int64{1, 2, 3} {
		put("clean", n)
	}
	// broken: ticket 2 twice, ticket 9 beyond issued, 3 and 4 lost.
	issue("broken", 5)
	for _, n := range []int64{1, 2, 2, 5, 9} {
		put("broken", n)
	}

	audit := func(program string, flags ...string) (int, string, string) {
		return runAudit(append([]string{"-program", program}, flags...)...)
	}

	code, out, errs := audit("clean")
	if code != exitOK {
		t.Errorf("audit clean: exit %d, want 0\n%s%s", code, out, errs)
	}
	wantLines(t, out, "(2 programs, 8 tokens, 0 claims, 0 ticket shards, 0 capacity groups, 0 handoff codes, 0 other)", "issued      4\n", "tokens      3 ",
		"tokens      3 (admission seen by a poll 0, of them ended early 0; left 0, neither recorded 3)\n",
		"gaps        1 tickets without a token (25.00 % of issued): 4\n", "issued 4 = tokens 3 + gaps 1\n  OK\n")

	code, out, errs = audit("broken")
	if code != exitFail {
		t.Errorf("audit broken: exit %d, want 1\n%s%s", code, out, errs)
	}
	wantLines(t, out, "duplicates  1 tickets", "duplicate ticket 2: tokens ", "out of range: ticket 9, token ",
		"gaps        2 tickets without a token (40.00 % of issued): 3-4\n", "FAIL\n")

	// -max-gaps: clean's one gap in four tickets is 25 %.
	if code, out, errs := audit("clean", "-max-gaps", "0.2"); code != exitFail || !strings.Contains(out, "(25.00 % of issued, above the limit of 20 %)") || !strings.Contains(out, "FAIL\n") {
		t.Errorf("audit clean -max-gaps 0.2: exit %d, want 1\n%s%s", code, out, errs)
	}
	if code, out, errs := audit("clean", "-max-gaps", "0.25"); code != exitOK || !strings.Contains(out, "(25.00 % of issued, within the limit of 25 %)") {
		t.Errorf("audit clean -max-gaps 0.25: exit %d, want 0\n%s%s", code, out, errs)
	}

	if code, out, _ := audit(""); code != exitFail || !strings.Contains(out, "program broken\n") || !strings.Contains(out, "program clean\n") {
		t.Errorf("audit all: exit %d, want 1 with both programs:\n%s", code, out)
	}
	if code, _, errs := audit("absent"); code != exitError || !strings.Contains(errs, `no program "absent"`) {
		t.Errorf("audit absent: exit %d, stderr %q; want 2 and no program", code, errs)
	}
}

func TestRunUsage(t *testing.T) {
	var out, errs strings.Builder
	if code := run(t.Context(), []string{"extra"}, func(string) string { return "" }, &out, &errs); code != exitError {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
	for _, bad := range []string{"-1", "1", "x"} {
		if code := run(t.Context(), []string{"-max-gaps", bad}, func(string) string { return "" }, &out, &errs); code != exitError {
			t.Errorf("-max-gaps %s: exit %d, want 2", bad, code)
		}
	}
	errs.Reset()
	if code := run(t.Context(), nil, func(string) string { return "" }, &out, &errs); code != exitError || !strings.Contains(errs.String(), "TABLE_NAME is required") {
		t.Errorf("no table, no endpoint: exit %d, stderr %q", code, errs.String())
	}
}

// TestRunShuffled: a shuffled opening run through the service on the
// DynamoDB API, its seed signed by a KMS key on moto; once the pre-queue
// is fixed the audit verifies the seed the answers publish against the
// published key and recomputes every place, and fails a tampered seed.
// Two instances, each with its own client of the key, reveal one seed.
func TestRunShuffled(t *testing.T) {
	ctx := t.Context()
	client, table, runAudit := newTable(t)
	kc := kmstest.Client(t)
	keyID := kmstest.NewShuffleKey(t, kc)
	c := simclock.NewFake(time.Now().Truncate(time.Second))
	instance := func() *queue.Service {
		return queue.NewService(dynamostore.New(client, table), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second),
			queue.WithShuffleKey(shufflekey.NewKMSKey(kc, keyID)))
	}
	svc, other := instance(), instance()
	opens, yes := c.Now().Add(time.Hour), true
	if _, _, err := svc.PutProgram(ctx, "draw", api.ProgramSettings{OpensAt: new(opens.Format(time.RFC3339Nano)), ShuffleAtOpen: &yes, Paused: &yes}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		c.Advance(100 * time.Millisecond)
		v, _, err := svc.Enter(ctx, "draw", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.TokenID)
	}
	audit := func(args ...string) (int, string) {
		code, out, errs := runAudit(append([]string{"-program", "draw"}, args...)...)
		return code, out + errs
	}
	if code, out := audit(); code != exitOK || !strings.Contains(out, "pre-queue not fixed yet") {
		t.Errorf("before the opening: exit %d\n%s", code, out)
	}
	scanned, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var before []map[string]any
	if err := attributevalue.UnmarshalListOfMaps(scanned.Items, &before); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	var sh *queue.ShuffleView
	places := map[int64]bool{}
	for i, id := range ids {
		v, err := []*queue.Service{svc, other}[i%2].Poll(ctx, "draw", id) // the first fixes the pre-queue
		if err != nil || v.Shuffle == nil || v.Shuffle.Seed == "" {
			t.Fatalf("poll after the opening: %+v %v", v, err)
		}
		if sh != nil && (v.Shuffle.Seed != sh.Seed || v.Shuffle.PublicKey != sh.PublicKey) {
			t.Fatalf("two instances revealed two seeds: %s and %s", sh.Seed, v.Shuffle.Seed)
		}
		sh, places[v.Shuffle.Place] = v.Shuffle, true
	}
	if s := fmt.Sprint(before); strings.Contains(s, sh.Seed) || len(before) != 8 {
		t.Errorf("the table before the opening holds the seed %s, or not the program, its list entry, its creation and 5 tokens: %s", sh.Seed, s)
	}
	if len(places) != 5 {
		t.Errorf("places %v, want 1..5", places)
	}
	if code, out := audit("-shuffle-key", sh.PublicKey, "-shuffle-seed", sh.Seed); code != exitOK || !strings.Contains(out, "seed verified against the key; pre-queue places: 5 checked, 0 wrong") {
		t.Errorf("after the opening: exit %d\n%s", code, out)
	}
	tampered := []byte(sh.Seed)
	tampered[0] ^= 'A' ^ 'B'
	if code, out := audit("-shuffle-key", sh.PublicKey, "-shuffle-seed", string(tampered)); code != exitFail || !strings.Contains(out, "NOT the key's signature") {
		t.Errorf("a tampered seed: exit %d\n%s", code, out)
	}
	if code, out := run(ctx, []string{"-shuffle-seed", sh.Seed}, func(string) string { return "" }, io.Discard, io.Discard), ""; code != exitError {
		t.Errorf("-shuffle-seed without -program: exit %d %s", code, out)
	}
}

// TestRunCapped: a capped program run through the service on the
// DynamoDB API (cap 3): one session ended by the site, one left by its
// holder, one no-show; the audit finds them, the peak within the cap, and
// fails once a token is planted that makes four active at once.
func TestRunCapped(t *testing.T) {
	ctx := t.Context()
	client, table, runAudit := newTable(t)
	key, err := localkeys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	iss, err := localkeys.FixedIssuer("https://queue.example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	c := simclock.NewFake(time.Now().Truncate(time.Second))
	svc := queue.NewService(dynamostore.New(client, table), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second), queue.WithPassSigner(app.Signer(iss)))
	if _, _, err := svc.PutProgram(ctx, "capped", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(3)), NoShowSeconds: new(int64(5)),
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 6 {
		v, _, err := svc.Enter(ctx, "capped", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.TokenID)
	}
	poll := func(i int) queue.View {
		t.Helper()
		v, err := svc.Poll(ctx, "capped", ids[i])
		if err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
		return v
	}
	c.Advance(time.Second)
	pass := poll(0).AdmissionPass
	poll(1)
	poll(2)
	if err := svc.ReleaseSession(ctx, "capped", pass); err != nil {
		t.Fatal(err)
	}
	if err := svc.Leave(ctx, "capped", ids[1]); err != nil {
		t.Fatal(err)
	}
	// Place 4 is admitted once the end frees a slot, and is a no-show
	// 5 s later; token 4's polls drive the folds until it is admitted.
	for step := 0; poll(4).Status != queue.StatusAdmitted; step++ {
		if step == 150 {
			t.Fatal("token 4 never admitted")
		}
		c.Advance(100 * time.Millisecond)
	}
	c.Advance(time.Second) // a last fold counts everything
	poll(5)

	audit := func() (int, string) {
		code, out, errs := runAudit("-program", "capped")
		return code, out + errs
	}
	code, out := audit()
	for _, want := range []string{
		"1 capacity groups",
		"active      at most 3 at once",
		"within the cap of 3\n",
		"ended       by the site 1 (program's total 1), by their holder 1 (slot held until the window ends)\n",
		"no-shows    1 sealed and not sighted (program's total 1)\n",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, out)
		}
	}

	// Token 5 (place 6, waiting) admitted now, as if the counter had let
	// it in with three slots held: four active at once.
	now := c.Now().UnixMilli()
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + ids[5]}, "sk": &types.AttributeValueMemberS{Value: "TOKEN"}},
		UpdateExpression:          aws.String("SET admittedAt = :a, admissionExpiresAt = :e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: fmt.Sprint(now)}, ":e": &types.AttributeValueMemberN{Value: fmt.Sprint(now + 60_000)}},
	}); err != nil {
		t.Fatal(err)
	}
	code, out = audit()
	for _, want := range []string{"active      at most 4 at once", "ABOVE the cap of 3", "inconsistent place 6 (token " + ids[5] + "): admitted (admittedAt) but not sighted", "FAIL\n"} {
		if code != exitFail || !strings.Contains(out, want) {
			t.Errorf("planted: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

// TestRunMoves audits, on the DynamoDB API, what the service writes for
// an account entering from two devices (one token, one ticket) and for a
// place a handoff moved (the old token names the new, both on its
// ticket): OK, with the moves and accounts counted; then a moved token
// whose new token holds another ticket fails.
func TestRunMoves(t *testing.T) {
	ctx := t.Context()
	client, table, runAudit := newTable(t)
	store := dynamostore.New(client, table)
	site := enqueuetest.New(t)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithEnqueue(enqueue.NewVerifier(site.Client, nil)))
	set := api.ProgramSettings{Paused: new(true), EnqueueJWKSURL: new(site.JWKSURL), EnqueueIssuer: new(enqueuetest.Issuer)}
	if _, _, err := svc.PutProgram(ctx, "fans", set); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 { // alice's laptop and phone
		v, _, err := svc.Enter(ctx, "fans", queue.Entry{Enqueue: site.Token(t, "fans", "alice")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.TokenID)
	}
	if ids[0] != ids[1] {
		t.Fatalf("alice's enters answered %v", ids)
	}
	laptop, _, err := svc.Enter(ctx, "fans", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := svc.MakeHandoff(ctx, "fans", laptop.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	phone, moved, err := svc.Redeem(ctx, "fans", code, "phone-redeem-key-0001")
	if err != nil || !moved || phone.Ticket != laptop.Ticket {
		t.Fatalf("Redeem = %+v, %v, %v; want ticket %d moved", phone, moved, err, laptop.Ticket)
	}

	status, out, errs := runAudit("-program", "fans")
	if status != exitOK {
		t.Errorf("audit: exit %d, want 0\n%s%s", status, out, errs)
	}
	wantLines(t, out, "(1 programs, 3 tokens, 0 claims, ", "1 handoff codes, ", "issued      2\n",
		"tokens      2 (admission seen by a poll 0, of them ended early 0; left 0, neither recorded 2)\n",
		"moved       1 tokens by handoffs, not counted above (each names the token that holds its ticket now)\n",
		"accounts    1 tokens are accounts' places (enqueue tokens), 0 accounts hold more than one\n",
		"duplicates  0 tickets", "issued 2 = tokens 2 + gaps 0\n  OK\n")

	// A moved token whose new token holds another ticket (alice's).
	bad := queue.Token{ID: queue.NewTokenID(), ProgramID: "fans", Ticket: laptop.Ticket, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
		MovedTo: ids[0], MovedAt: time.Now()}
	if err := store.PutToken(ctx, bad); err != nil {
		t.Fatal(err)
	}
	status, out, errs = runAudit("-program", "fans")
	if status != exitFail {
		t.Errorf("audit with a bad move: exit %d, want 1\n%s%s", status, out, errs)
	}
	wantLines(t, out, fmt.Sprintf("bad move: ticket %d, token %s: moved to token %s, which holds ticket 1\n", laptop.Ticket, bad.ID, ids[0]), "FAIL\n")
}
