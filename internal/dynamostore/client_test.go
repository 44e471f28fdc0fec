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
// the attempt timeouts end it.
func TestClientGivesUpBeforeDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	// Every request hangs.
	ft := faultinject.New(nil, 1)
	ft.SetRules(faultinject.Rule{Action: faultinject.Hold, Delay: time.Minute})
	newClient := func(attempt time.Duration) *dynamodb.Client {
		client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{
			Endpoint:       srv.URL,
			Transport:      ft,
			AttemptTimeout: attempt,
			MaxAttempts:    2,
		})
		if err != nil {
			t.Fatal(err)
		}
		return client
	}
	get := func(client *dynamodb.Client, timeout time.Duration) (time.Duration, error) {
		ctx := t.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		start := time.Now()
		_, err := client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		})
		return time.Since(start), err
	}

	patient := newClient(time.Minute)
	// 2 s to the deadline: the call gives up DefaultDeadlineReserve
	// (500 ms) before it.
	if took, err := get(patient, 2*time.Second); err == nil || took < 1400*time.Millisecond || took > 1800*time.Millisecond {
		t.Errorf("deadline 2 s away: err %v after %v, want an error after about 1.5 s", err, took)
	}
	// 200 ms to the deadline: the reserve shrinks to a quarter of that.
	if took, err := get(patient, 200*time.Millisecond); err == nil || took >= 200*time.Millisecond {
		t.Errorf("deadline 200 ms away: err %v after %v, want an error before the deadline", err, took)
	}
	// No deadline: two attempts of 300 ms, and a backoff of at most 200 ms.
	ft.SetRules(faultinject.Rule{Action: faultinject.Hold, Delay: time.Minute})
	if took, err := get(newClient(300*time.Millisecond), 0); err == nil || took > 1500*time.Millisecond {
		t.Errorf("no deadline: err %v after %v, want an error within about 800 ms", err, took)
	}
	if got := ft.Calls("GetItem"); got != 2 {
		t.Errorf("%d attempts, want 2", got)
	}
}
