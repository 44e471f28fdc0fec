package dynamostore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/testing/faultinject"
)

// TestClientBudget: the default retries and timeouts fit in the functions'
// Lambda timeout, with the reserve left for the handler's answer.
func TestClientBudget(t *testing.T) {
	var o dynamostore.ClientOptions
	if got, want := o.MaxCallDuration(), 3400*time.Millisecond; got != want {
		t.Errorf("MaxCallDuration = %v, want %v (3 attempts × 1 s + 2 × 200 ms)", got, want)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no template.yaml")
	} else if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+Timeout:\s*(\d+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("template.yaml: no function Timeout")
	}
	secs, _ := strconv.Atoi(string(m[1]))
	lambda := time.Duration(secs) * time.Second
	if o.MaxCallDuration()+dynamostore.DefaultDeadlineReserve > lambda {
		t.Errorf("one call may take %v and the handler needs %v to answer, over the Lambda timeout of %v",
			o.MaxCallDuration(), dynamostore.DefaultDeadlineReserve, lambda)
	}
}

// TestClientGivesUpBeforeDeadline: a call whose context has a deadline
// ends before it, leaving the caller time to answer; without a deadline
// the attempt timeouts end it. Every attempt times out at once
// (faultinject.Timeout); the reserve and the attempt timeouts are read
// from the deadlines the attempts carried.
func TestClientGivesUpBeforeDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	ft := faultinject.New(nil, 1)
	newClient := func(attempt time.Duration) *dynamodb.Client {
		client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{
			Endpoint:       srv.URL,
			Transport:      ft,
			AttemptTimeout: attempt,
			MaxAttempts:    2,
			Backoff:        dynamostore.NoBackoff,
		})
		if err != nil {
			t.Fatal(err)
		}
		return client
	}
	// get makes a GetItem whose every attempt times out, with a deadline
	// timeout away (none if 0), and returns the attempts' deadlines and
	// the instants between which the call started.
	get := func(client *dynamodb.Client, timeout time.Duration) (deadline time.Time, attempts []time.Time, before, after time.Time) {
		t.Helper()
		ft.SetRules(faultinject.Rule{Action: faultinject.Timeout})
		ctx := t.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			deadline = time.Now().Add(timeout)
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		before = time.Now()
		_, err := client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		})
		after = time.Now()
		if err == nil {
			t.Errorf("deadline %v away: no error from a store that never answers in time", timeout)
		}
		if got := ft.Calls("GetItem"); got != 2 {
			t.Errorf("deadline %v away: %d attempts, want 2", timeout, got)
		}
		return deadline, ft.Deadlines("GetItem"), before, after
	}
	// reserved checks that each attempt gave up the reserve before the
	// deadline: a quarter of the time left when the call started (between
	// before and after), at most DefaultDeadlineReserve.
	reserved := func(deadline time.Time, attempts []time.Time, before, after time.Time) {
		t.Helper()
		most := min(dynamostore.DefaultDeadlineReserve, deadline.Sub(before)/4)
		least := min(dynamostore.DefaultDeadlineReserve, deadline.Sub(after)/4)
		for _, d := range attempts {
			if kept := deadline.Sub(d); d.IsZero() || kept < least || kept > most {
				t.Errorf("deadline %v away: an attempt's deadline keeps %v before it, want %v to %v", deadline.Sub(before).Round(time.Millisecond), kept, least, most)
			}
		}
	}

	patient := newClient(time.Minute)
	// 2 s to the deadline: the call gives up DefaultDeadlineReserve
	// (500 ms, or a little less: a quarter of the time left) before it.
	reserved(get(patient, 2*time.Second))
	// 200 ms to the deadline: the reserve shrinks to a quarter of that.
	reserved(get(patient, 200*time.Millisecond))
	// No deadline: two attempts of 300 ms each.
	_, attempts, before, after := get(newClient(300*time.Millisecond), 0)
	for _, d := range attempts {
		if d.Before(before.Add(300*time.Millisecond)) || d.After(after.Add(300*time.Millisecond)) {
			t.Errorf("no deadline: an attempt's deadline %v after the call began, want the attempt timeout of 300 ms", d.Sub(before))
		}
	}
}
