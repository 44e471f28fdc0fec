package faultinject_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/example/waitingroom/internal/testing/faultinject"
	"github.com/example/waitingroom/internal/tools/dynamowire"
)

// fakeDynamo answers every request with an empty JSON object (a GetItem
// that found nothing, an UpdateItem with no return values) and counts the
// requests per operation that reached it.
type fakeDynamo struct {
	get, update atomic.Int32
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch dynamowire.Operation(r) {
	case "GetItem":
		f.get.Add(1)
	case "UpdateItem":
		f.update.Add(1)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write([]byte("{}"))
}

// newClient returns an SDK client that reaches a fakeDynamo through a
// fault-injecting Transport, trying each call once: these tests look at
// what one attempt sees.
func newClient(t *testing.T) (*dynamodb.Client, *faultinject.Transport, *fakeDynamo) {
	t.Helper()
	fake := &fakeDynamo{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ft := faultinject.New(nil, 7)
	client := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:       &http.Client{Transport: ft},
		RetryMaxAttempts: 1,
	})
	return client, ft, fake
}

func getItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
	})
	return err
}

func updateItem(ctx context.Context, c *dynamodb.Client, expr string) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String("t"),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	return err
}

// retryable is how the SDK's standard retryer classifies err.
func retryable(err error) bool {
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool()
}

func throttle(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
}

// The error answers are DynamoDB's as the SDK sees them: the modelled error
// types and codes, retryable, and the throttling ones classified as
// throttling (which sets the backoff's base).
func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		action   faultinject.Action
		code     string
		throttle bool
		check    func(error) bool
	}{
		{faultinject.ThroughputExceeded, "ProvisionedThroughputExceededException", true,
			func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }},
		{faultinject.Throttling, "ThrottlingException", true,
			func(err error) bool { var e *types.ThrottlingException; return errors.As(err, &e) }},
		{faultinject.InternalServerError, "InternalServerError", false,
			func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }},
	}
	for _, tt := range tests {
		t.Run(tt.action.String(), func(t *testing.T) {
			client, ft, fake := newClient(t)
			ft.SetRules(faultinject.Rule{Action: tt.action})
			err := getItem(t.Context(), client)
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tt.code || !tt.check(err) {
				t.Fatalf("err = %v, want API error %s of its modelled type", err, tt.code)
			}
			if !retryable(err) {
				t.Errorf("the SDK would not retry %v", err)
			}
			if got := throttle(err); got != tt.throttle {
				t.Errorf("throttle = %v, want %v", got, tt.throttle)
			}
			if n := fake.get.Load(); n != 0 {
				t.Errorf("the server saw %d requests, want 0: an error answer is not forwarded", n)
			}
			if got := ft.Faults("GetItem"); got != 1 {
				t.Errorf("Faults = %d, want 1", got)
			}
		})
	}
}

func TestDrop(t *testing.T) {
	for _, tt := range []struct {
		action  faultinject.Action
		reached int32 // requests the server saw
	}{
		{faultinject.Drop, 0},
		{faultinject.DropResponse, 1},
	} {
		t.Run(tt.action.String(), func(t *testing.T) {
			client, ft, fake := newClient(t)
			ft.SetRules(faultinject.Rule{Op: "UpdateItem", Action: tt.action})
			err := updateItem(t.Context(), client, "ADD n :one")
			if !errors.Is(err, faultinject.ErrConnectionReset) {
				t.Fatalf("err = %v, want the connection reset", err)
			}
			if !retryable(err) {
				t.Errorf("the SDK would not retry %v", err)
			}
			if got := fake.update.Load(); got != tt.reached {
				t.Errorf("the server saw %d requests, want %d", got, tt.reached)
			}
			// Other operations pass.
			if err := getItem(t.Context(), client); err != nil {
				t.Errorf("GetItem: %v", err)
			}
		})
	}
}

// Skip, Count and BodyContains select which requests are faulted; every
// rule counts what it matches, and the first rule that faults wins.
func TestRuleSelection(t *testing.T) {
	client, ft, fake := newClient(t)
	ctx := t.Context()
	ft.SetRules(
		faultinject.Rule{Op: "UpdateItem", BodyContains: "#issued", Skip: 1, Count: 2, Action: faultinject.InternalServerError},
		faultinject.Rule{Op: "UpdateItem", Skip: 4, Count: 1, Action: faultinject.Throttling},
	)
	var got []string
	for _, expr := range []string{"ADD #issued :one", "ADD #issued :one", "SET x = :one", "ADD #issued :one", "ADD #issued :one", "ADD #issued :one"} {
		err := updateItem(ctx, client, expr)
		var apiErr smithy.APIError
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.As(err, &apiErr):
			got = append(got, apiErr.ErrorCode())
		default:
			t.Fatalf("%s: %v", expr, err)
		}
	}
	// #issued 1: skipped; #issued 2: fault 1; SET: not matched by rule 1;
	// #issued 3: fault 2 (rule 2 matches its 4th request, skipped);
	// #issued 4: rule 1 exhausted, rule 2's 5th: throttled; then nothing.
	want := "ok InternalServerError ok InternalServerError ThrottlingException ok"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("answers:\n got %s\nwant %s", g, want)
	}
	if got, want := ft.Calls("UpdateItem"), 6; got != want {
		t.Errorf("Calls = %d, want %d", got, want)
	}
	if got, want := ft.Faults(""), 3; got != want {
		t.Errorf("Faults = %d, want %d", got, want)
	}
	if got, want := fake.update.Load(), int32(3); got != want {
		t.Errorf("the server saw %d, want %d", got, want)
	}
	// A new plan, fresh counts.
	ft.SetRules()
	if err := updateItem(ctx, client, "ADD #issued :one"); err != nil || ft.Calls("") != 1 || ft.Faults("") != 0 {
		t.Errorf("after SetRules(): err %v, calls %d, faults %d", err, ft.Calls(""), ft.Faults(""))
	}
}

// A Gate holds a slow answer after the server applied it, or a held
// request before it reaches the server, until the test releases it; the
// request's context ending cuts the hold short, as a real transport would.
func TestGate(t *testing.T) {
	client, ft, fake := newClient(t)
	ctx := t.Context()

	// Pass: applied, then held.
	gate := faultinject.NewGate()
	ft.SetRules(faultinject.Rule{Action: faultinject.Pass, Gate: gate})
	done := make(chan error, 1)
	go func() { done <- updateItem(ctx, client, "ADD n :one") }()
	if err := gate.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("answered (%v) before the gate was released", err)
	default:
	}
	if got := fake.update.Load(); got != 1 {
		t.Errorf("the server saw %d requests while the answer was held, want 1: a slow answer is applied", got)
	}
	gate.Release()
	if err := <-done; err != nil {
		t.Errorf("after Release: %v", err)
	}
	if err := updateItem(ctx, client, "ADD n :one"); err != nil || fake.update.Load() != 2 {
		t.Errorf("a released gate lets later requests through: err %v, server saw %d, want 2", err, fake.update.Load())
	}

	// Hold: held on its way in, so not applied until released; cut short
	// by its context, never forwarded.
	gate = faultinject.NewGate()
	ft.SetRules(faultinject.Rule{Action: faultinject.Hold, Gate: gate})
	hctx, cancel := context.WithCancel(ctx)
	go func() { done <- updateItem(hctx, client, "ADD n :one") }()
	if err := gate.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("held, context canceled: err = %v, want context.Canceled", err)
	}
	gate.Release()
	if got := fake.update.Load(); got != 2 {
		t.Errorf("the server saw %d requests, want still 2: a held request cut short is not forwarded", got)
	}

	// Wait gives up with its context.
	wctx, stop := context.WithCancel(ctx)
	stop()
	if err := faultinject.NewGate().Wait(wctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a done context: %v, want context.Canceled", err)
	}
}

// A slow answer is cut short by the request's context: the answer was
// applied and the caller gets the context's error at once.
func TestSlowAnswerCutShort(t *testing.T) {
	client, ft, fake := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	gate := faultinject.NewGate() // never released
	ft.SetRules(faultinject.Rule{Action: faultinject.Pass, Gate: gate})
	done := make(chan error, 1)
	go func() { done <- updateItem(ctx, client, "ADD n :one") }()
	if err := gate.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := fake.update.Load(); got != 1 {
		t.Errorf("the server saw %d requests, want 1: a slow answer is applied", got)
	}
}

// Timeout fails an attempt at once as a client timeout would, without
// forwarding it; TimeoutAfterApply after the server applied it. The SDK
// retries both, as it does a real attempt timeout.
func TestTimeout(t *testing.T) {
	client, ft, fake := newClient(t)
	ctx := t.Context()
	ft.SetRules(faultinject.Rule{Action: faultinject.Timeout})
	err := updateItem(ctx, client, "ADD n :one")
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, faultinject.ErrAttemptTimeout) {
		t.Errorf("Timeout: err = %v, want a timeout error", err)
	}
	if !retryable(err) {
		t.Errorf("Timeout: the SDK would not retry %v", err)
	}
	if got := fake.update.Load(); got != 0 {
		t.Errorf("Timeout: the server saw %d requests, want 0", got)
	}
	ft.SetRules(faultinject.Rule{Action: faultinject.TimeoutAfterApply})
	if err := updateItem(ctx, client, "ADD n :one"); !errors.Is(err, faultinject.ErrAttemptTimeout) {
		t.Errorf("TimeoutAfterApply: err = %v, want a timeout error", err)
	}
	if got := fake.update.Load(); got != 1 {
		t.Errorf("TimeoutAfterApply: the server saw %d requests, want 1 (applied)", got)
	}
}

// Deadlines records the deadline each request carried, per operation and
// in order: the zero time for a request without one.
func TestDeadlines(t *testing.T) {
	client, ft, _ := newClient(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	if err := getItem(ctx, client); err != nil {
		t.Fatal(err)
	}
	if err := updateItem(t.Context(), client, "ADD n :one"); err != nil {
		t.Fatal(err)
	}
	if got := ft.Deadlines("GetItem"); len(got) != 1 || !got[0].Equal(deadline) {
		t.Errorf("GetItem deadlines %v, want [%v]", got, deadline)
	}
	if got := ft.Deadlines("UpdateItem"); len(got) != 1 || !got[0].IsZero() {
		t.Errorf("UpdateItem deadlines %v, want [zero]", got)
	}
	if got := ft.Deadlines(""); len(got) != 2 {
		t.Errorf("all deadlines %v, want 2", got)
	}
	ft.SetRules()
	if got := ft.Deadlines(""); len(got) != 0 {
		t.Errorf("after SetRules: %v, want none", got)
	}
}

// Probability draws from the seeded generator: the same seed faults the
// same requests.
func TestProbabilityIsSeeded(t *testing.T) {
	pattern := func() string {
		client, ft, _ := newClient(t)
		ft.SetRules(faultinject.Rule{Probability: 0.3, Action: faultinject.InternalServerError})
		var b strings.Builder
		for range 200 {
			if getItem(t.Context(), client) != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b := pattern(), pattern()
	if a != b {
		t.Errorf("same seed, different faults:\n%s\n%s", a, b)
	}
	if n := strings.Count(a, "x"); n < 30 || n > 90 {
		t.Errorf("%d of 200 faulted at p=0.3", n)
	}
}

// FirstOnly faults a request the first time its body is seen: the same
// body again (the SDK's retry) passes, another body is faulted.
func TestFirstOnly(t *testing.T) {
	client, ft, fake := newClient(t)
	ctx := t.Context()
	ft.SetRules(faultinject.Rule{Op: "UpdateItem", FirstOnly: true, Action: faultinject.DropResponse})
	var got []string
	for _, expr := range []string{"ADD a :one", "ADD a :one", "ADD b :one", "ADD a :one", "ADD b :one"} {
		if err := updateItem(ctx, client, expr); errors.Is(err, faultinject.ErrConnectionReset) {
			got = append(got, "lost")
		} else if err != nil {
			t.Fatalf("%s: %v", expr, err)
		} else {
			got = append(got, "ok")
		}
	}
	if g, want := strings.Join(got, " "), "lost ok lost ok ok"; g != want {
		t.Errorf("answers:\n got %s\nwant %s", g, want)
	}
	if got, want := fake.update.Load(), int32(5); got != want {
		t.Errorf("the server saw %d, want %d (a lost answer is applied)", got, want)
	}
	if got := ft.RuleFaults(); len(got) != 1 || got[0] != 2 {
		t.Errorf("RuleFaults = %v, want [2]", got)
	}
}
