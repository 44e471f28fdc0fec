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
	"sync"
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

// deadlineSeen is a transport that records how long each request had left
// before its context's deadline when it arrived (-1: no deadline).
type deadlineSeen struct {
	base http.RoundTripper
	mu   sync.Mutex
	left []time.Duration
}

func (d *deadlineSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	left := time.Duration(-1)
	if dl, ok := r.Context().Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	d.left = append(d.left, left)
	d.mu.Unlock()
	return d.base.RoundTrip(r)
}

// take returns the times left recorded so far and forgets them.
func (d *deadlineSeen) take() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.left
	d.left = nil
	return l
}

// TestClientGivesUpBeforeDeadline: a call whose context has a deadline
// ends before it, leaving the caller time to answer; without a deadline
// the attempt timeouts end it. The reserve and the attempt timeouts are
// read from the requests' deadlines, not from how long the calls took,
// which on a busy machine includes any wait for a core; durations are
// checked only where time can only make them longer.
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
	seen := &deadlineSeen{base: ft}
	newClient := func(attempt time.Duration) *dynamodb.Client {
		client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{
			Endpoint:       srv.URL,
			Transport:      seen,
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
	// (500 ms) before it: its one request has at most 1.5 s left, and it
	// took at least about that long.
	if took, err := get(patient, 2*time.Second); err == nil || took < 1400*time.Millisecond {
		t.Errorf("deadline 2 s away: err %v after %v, want an error after about 1.5 s", err, took)
	}
	if left := seen.take(); len(left) != 1 || left[0] < 0 || left[0] > 1500*time.Millisecond {
		t.Errorf("deadline 2 s away: the requests had %v left, want one with at most 1.5 s", left)
	}
	// 200 ms to the deadline: the reserve shrinks to a quarter of that.
	if _, err := get(patient, 200*time.Millisecond); err == nil {
		t.Errorf("deadline 200 ms away: no error")
	}
	if left := seen.take(); len(left) != 1 || left[0] < 0 || left[0] > 150*time.Millisecond {
		t.Errorf("deadline 200 ms away: the requests had %v left, want one with at most 150 ms", left)
	}
	// No deadline: two attempts of 300 ms each; the minute bounds a hang.
	ft.SetRules(faultinject.Rule{Action: faultinject.Hold, Delay: time.Minute})
	if took, err := get(newClient(300*time.Millisecond), 0); err == nil || took < 600*time.Millisecond || took > 30*time.Second {
		t.Errorf("no deadline: err %v after %v, want an error after two attempts of 300 ms", err, took)
	}
	if left := seen.take(); len(left) != 2 || left[0] < 0 || left[0] > 300*time.Millisecond || left[1] < 0 || left[1] > 300*time.Millisecond {
		t.Errorf("no deadline: the attempts had %v left, want two with at most 300 ms each", left)
	}
	if got := ft.Calls("GetItem"); got != 2 {
		t.Errorf("%d attempts, want 2", got)
	}
}
