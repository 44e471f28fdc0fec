package dynamostore_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/storetest"
	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// TestMain runs the store's tests on dynalite, which locks items as
// DynamoDB does (moto needs a proxy that passes one request at a time);
// TestCreateTable (the TTL API, which dynalite lacks) and the tests that
// want a second implementation of the conditions run on moto.
// DYNAMODB_TEST_SERVER=moto runs them all on moto.
func TestMain(m *testing.M) {
	dynamotest.Server = "dynalite"
	dynamotest.Main(m)
}

// newClient returns a client for the shared test server; newClientAt for
// the one at endpoint. Its attempts may take a minute rather than the
// production 1 s: on moto the contract's concurrency tests queue 16
// callers behind a proxy that passes one request at a time, in some 20 ms
// on an idle machine and over 300 ms on a busy one, so an attempt can wait
// seconds, and a retried IssueTicket would leave a gap the contract
// rightly does not expect without faults. faults_test.go tests the
// production timeouts.
func newClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	return newClientAt(t, dynamotest.Endpoint(t))
}

func newClientAt(t *testing.T, endpoint string) *dynamodb.Client {
	t.Helper()
	client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{
		Endpoint:       endpoint,
		AttemptTimeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return client
}

// TestContract holds the store to the contract on dynalite, which locks
// items as DynamoDB does, so that the contract's races are decided by the
// conditions rather than by moto's proxy passing one request at a time.
func TestContract(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	storetest.Run(t, func(t *testing.T) queue.Store {
		return dynamostore.New(client, dynamotest.NewTable(t, client))
	})
}

// TestProofReplay: 16 enters with one proof of work take one ticket, the
// use record's conditional write deciding on DynamoDB's side.
func TestProofReplay(t *testing.T) {
	t.Parallel()
	client := newClientAt(t, dynamotest.Moto(t))
	storetest.ProofReplay(t, dynamostore.New(client, dynamotest.NewTable(t, client)))
}

// TestHandoffRace: 16 devices redeeming one handoff code on dynalite move
// the place once.
func TestHandoffRace(t *testing.T) {
	t.Parallel()
	client := newClientAt(t, dynamotest.Lease(t))
	storetest.HandoffRace(t, dynamostore.New(client, dynamotest.NewTable(t, client)))
}

// TestPassKeys holds the store to admissionpass.KeyStore's contract on moto,
// whose proxy passes one request at a time, as ProofReplay does: the
// racing claims are decided by the condition on DynamoDB's side.
func TestPassKeys(t *testing.T) {
	t.Parallel()
	client := newClientAt(t, dynamotest.Moto(t))
	storetest.PassKeys(t, dynamostore.New(client, dynamotest.NewTable(t, client)))
}

// TestPassKeysItem: a signing slot's item, claimed, then holding its key,
// then revoked.
func TestPassKeysItem(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	table := dynamotest.NewTable(t, client)
	s := dynamostore.New(client, table)
	signFrom := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(1234 * time.Millisecond) // 1772366401234 ms
	claimAt := signFrom.Add(-time.Hour)
	if ok, err := s.ClaimPassKey(ctx, signFrom, "maker", claimAt, claimAt.Add(-time.Minute)); !ok || err != nil {
		t.Fatalf("ClaimPassKey = %v, %v; want true", ok, err)
	}
	const pk, sk = "PASSKEYS", "KEY#001772366401234"
	want := map[string]string{
		"pk":      "S:" + pk,
		"sk":      "S:" + sk,
		"claimId": "S:maker",
		"claimMs": "N:1772362801234",
	}
	checkItem(t, rawItem(t, client, table, pk, sk), want)

	k := admissionpass.StoredKey{
		SignFrom: signFrom,
		KeyID:    "kid-1",
		Public:   []byte{0x30, 0x59},
		Wrapped:  []byte{0x01, 0xff},
		Created:  claimAt.Add(5 * time.Millisecond),
		Expires:  signFrom.Add(72 * time.Hour), // 1772625601.234 s
	}
	if ok, err := s.PutPassKey(ctx, k, "maker"); !ok || err != nil {
		t.Fatalf("PutPassKey = %v, %v; want true", ok, err)
	}
	want["keyId"] = "S:kid-1"
	want["public"] = "B:3059"
	want["wrapped"] = "B:01ff"
	want["createdMs"] = "N:1772362801239"
	want["ttl"] = "N:1772625602" // rounded up: never deleted early
	checkItem(t, rawItem(t, client, table, pk, sk), want)

	if _, err := s.RevokePassKey(ctx, "kid-1", signFrom.Add(time.Hour)); err != nil {
		t.Fatalf("RevokePassKey: %v", err)
	}
	want["revokedMs"] = "N:1772370001234"
	checkItem(t, rawItem(t, client, table, pk, sk), want)
}

// rawItem reads an item as stored.
func rawItem(t *testing.T, client *dynamodb.Client, table, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: &table,
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: sk},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem(%s, %s): %v", pk, sk, err)
	}
	if len(out.Item) == 0 {
		t.Fatalf("GetItem(%s, %s): no item", pk, sk)
	}
	return out.Item
}

// attrString renders an attribute value as "S:x", "N:1.5", "B:0aff" (hex),
// "BOOL:true", "L:[S:a S:b]", "SS:[a b]" (sorted); "" for an absent one.
func attrString(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B:%x", v.Value)
	case *types.AttributeValueMemberBOOL:
		return "BOOL:" + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberSS:
		return "SS:[" + strings.Join(slices.Sorted(slices.Values(v.Value)), " ") + "]"
	case *types.AttributeValueMemberL:
		items := make([]string, len(v.Value))
		for i, e := range v.Value {
			items[i] = attrString(e)
		}
		return "L:[" + strings.Join(items, " ") + "]"
	case nil:
		return ""
	default:
		return fmt.Sprintf("unexpected %T", av)
	}
}

// checkItem compares item with want, attribute by attribute (see
// attrString); "" wants the attribute absent.
func checkItem(t *testing.T, item map[string]types.AttributeValue, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for name, av := range item {
		got[name] = attrString(av)
	}
	for name, w := range want {
		if w == "" {
			delete(want, name)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("item (-want +got):\n%s", d)
	}
}

func TestProgramItem(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	table := dynamotest.NewTable(t, client)
	s := dynamostore.New(client, table)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // 1772366400000 ms
	p := admission.Program{
		ID:        "spring-sale",
		CreatedAt: t0,
		Version:   1,
		Issued:    0,
		Current:   pace.Segment{AnchorMs: t0.UnixMilli(), Rate: 4 * pace.OnePerSecond},
		DrainAtNs: t0.UnixNano(),
		Options:   settings.Options{AdmissionWindow: 10 * time.Minute},
	}
	if err := s.CreateProgram(ctx, p); err != nil {
		t.Fatalf("CreateProgram: %v", err)
	}
	want := map[string]string{
		"pk":                "S:PROGRAM#spring-sale",
		"sk":                "S:PROGRAM",
		"programId":         "S:spring-sale",
		"createdAt":         "N:1772366400000",
		"version":           "N:1",
		"issued":            "N:0",
		"anchorMs":          "N:1772366400000",
		"base":              "N:0",
		"rateMilli":         "N:4000",
		"paused":            "BOOL:false",
		"nextAnchorMs":      "N:0",
		"nextBase":          "N:0",
		"nextRateMilli":     "N:0",
		"nextPaused":        "BOOL:false",
		"advancing":         "BOOL:true",
		"nsPerTicket":       "N:250000000",
		"drainAtNs":         "N:1772366400000000000",
		"admissionWindowMs": "N:600000",
		"closed":            "BOOL:false",
		"manualRateMilli":   "N:0",
		"lastAdmitAtMs":     "N:0",
		"lastAdmitGapMs":    "N:0",
	}
	checkItem(t, rawItem(t, client, table, "PROGRAM#spring-sale", "PROGRAM"), want)

	// Paused, with a change id and a policy: not advancing, no time per
	// ticket.
	upd := p.Rebased(t0.Add(time.Second), 4*pace.OnePerSecond, true, 0, 0)
	upd.Changes, upd.Policy = []string{"change-2", "change-1"}, "eta"
	// A change scheduled at 2.5/s: the settled segment says how tickets
	// push the drain instant back.
	next := upd.Rebased(t0.Add(2*time.Second), pace.Rate(2500), false, 0, time.Second) // 2.5/s
	next.Policy = ""
	for _, step := range []struct {
		p       admission.Program
		changed map[string]string
	}{
		{upd, map[string]string{
			"version": "N:2", "paused": "BOOL:true", "advancing": "BOOL:false", "nsPerTicket": "N:0",
			"anchorMs": "N:1772366401000", "drainAtNs": "N:1772366401000000000",
			"changeIds": "L:[S:change-2 S:change-1]", "policy": "S:eta",
		}},
		{next, map[string]string{
			"version": "N:3", "nextAnchorMs": "N:1772366403000", "nextBase": "N:0", "nextRateMilli": "N:2500",
			"advancing": "BOOL:true", "nsPerTicket": "N:400000000", "drainAtNs": "N:1772366403000000000", "policy": "",
		}},
	} {
		if err := s.UpdateProgram(ctx, step.p, p.Issued); err != nil {
			t.Fatalf("UpdateProgram: %v", err)
		}
		maps.Copy(want, step.changed)
		checkItem(t, rawItem(t, client, table, "PROGRAM#spring-sale", "PROGRAM"), want)
	}
}

func TestTokenItem(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	table := dynamotest.NewTable(t, client)
	s := dynamostore.New(client, table)
	issued := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(1234 * time.Millisecond)
	tok := queue.Token{
		ID:        "AAAAAAAAAAAAAAAAAAAAAA",
		ProgramID: "spring-sale",
		Ticket:    42,
		IssuedAt:  issued,
		ExpiresAt: issued.Add(48 * time.Hour), // 1772539201.234 s
	}
	if err := s.PutToken(ctx, tok); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
	want := map[string]string{
		"pk":        "S:TOKEN#AAAAAAAAAAAAAAAAAAAAAA",
		"sk":        "S:TOKEN",
		"tokenId":   "S:AAAAAAAAAAAAAAAAAAAAAA",
		"programId": "S:spring-sale",
		"ticket":    "N:42",
		"issuedAt":  "N:1772366401234",
		"ttl":       "N:1772539202", // rounded up: never deleted early
	}
	checkItem(t, rawItem(t, client, table, "TOKEN#AAAAAAAAAAAAAAAAAAAAAA", "TOKEN"), want)

	adm := tok
	adm.AdmittedAt = issued.Add(time.Minute)
	adm.AdmissionExpiresAt = adm.AdmittedAt.Add(10 * time.Minute)
	adm.ExpiresAt = adm.AdmissionExpiresAt.Add(24 * time.Hour)
	if _, err := s.MarkAdmitted(ctx, adm); err != nil {
		t.Fatalf("MarkAdmitted: %v", err)
	}
	want["admittedAt"] = "N:1772366461234"
	want["admissionExpiresAt"] = "N:1772367061234"
	want["ttl"] = "N:1772453462"
	checkItem(t, rawItem(t, client, table, "TOKEN#AAAAAAAAAAAAAAAAAAAAAA", "TOKEN"), want)

	rev := adm
	rev.RevokedAt = adm.AdmittedAt.Add(time.Minute)
	rev.ExpiresAt = rev.RevokedAt.Add(48 * time.Hour)
	if _, err := s.RevokeToken(ctx, rev); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	want["revokedAt"] = "N:1772366521234"
	want["ttl"] = "N:1772539322"
	checkItem(t, rawItem(t, client, table, "TOKEN#AAAAAAAAAAAAAAAAAAAAAA", "TOKEN"), want)
}

func TestCreateTable(t *testing.T) {
	ctx := t.Context()
	client := newClientAt(t, dynamotest.Moto(t)) // dynalite has no TTL API
	table := dynamotest.NewTable(t, client)

	// Idempotent: a second call finds the table and TTL in place.
	if err := localdynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("second CreateTable: %v", err)
	}

	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	td := desc.Table
	if got, want := td.TableStatus, types.TableStatusActive; got != want {
		t.Errorf("TableStatus = %s, want %s", got, want)
	}
	if td.BillingModeSummary == nil {
		t.Errorf("BillingModeSummary = nil, want %s", types.BillingModePayPerRequest)
	} else if got, want := td.BillingModeSummary.BillingMode, types.BillingModePayPerRequest; got != want {
		t.Errorf("BillingMode = %s, want %s", got, want)
	}
	keys := map[string]types.KeyType{}
	for _, k := range td.KeySchema {
		keys[aws.ToString(k.AttributeName)] = k.KeyType
	}
	if got, want := keys, map[string]types.KeyType{"pk": types.KeyTypeHash, "sk": types.KeyTypeRange}; len(got) != len(want) || got["pk"] != want["pk"] || got["sk"] != want["sk"] {
		t.Errorf("KeySchema = %v, want %v", got, want)
	}

	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	d := ttl.TimeToLiveDescription
	if d == nil {
		t.Fatal("TimeToLiveDescription = nil")
	}
	if got, want := d.TimeToLiveStatus, types.TimeToLiveStatusEnabled; got != want {
		t.Errorf("TimeToLiveStatus = %s, want %s", got, want)
	}
	if got, want := aws.ToString(d.AttributeName), "ttl"; got != want {
		t.Errorf("TTL attribute = %q, want %q", got, want)
	}
}

// A store fault is neither ErrNotFound nor ErrConflict, and says what failed.
func TestStoreFault(t *testing.T) {
	client := newClient(t)
	s := dynamostore.New(client, "no-such-table")
	_, err := s.IssueTicket(t.Context(), "p", t0)
	if err == nil || errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrConflict) {
		t.Fatalf("IssueTicket on a missing table: %v, want a store fault", err)
	}
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Errorf("IssueTicket on a missing table: %v, want it to wrap ResourceNotFoundException", err)
	}
}
