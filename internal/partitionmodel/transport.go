package partitionmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/dynamowire"
)

// Options configure a Transport; zero fields take the defaults.
type Options struct {
	// PartitionKey and SortKey name the table's key attributes (default
	// "pk" and "sk", this project's table): requests are charged to the
	// partition of their partition key value, and item sizes are tracked
	// per full key.
	PartitionKey, SortKey string
	// ErrorCode is the throttling error answered: the default
	// "ProvisionedThroughputExceededException" is what DynamoDB answers for
	// a hot partition, with a KeyRangeThroughputExceeded throttling
	// reason; "ThrottlingException" is the other code the SDK retries as a
	// throttle.
	ErrorCode string
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Transport is an http.RoundTripper in front of a DynamoDB API server that
// applies a Model to every single-item request and passes every other
// request (Query, Scan, batches, table operations) through uncharged. It
// is safe for concurrent use.
type Transport struct {
	base  http.RoundTripper
	model *Model
	opts  Options

	mu    sync.Mutex
	sizes map[string]int // item key → last known size in bytes
}

// New returns a Transport forwarding to base (http.DefaultTransport if nil)
// under limits l.
func New(base http.RoundTripper, l Limits, o Options) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	if o.PartitionKey == "" {
		o.PartitionKey = "pk"
	}
	if o.SortKey == "" {
		o.SortKey = "sk"
	}
	if o.ErrorCode == "" {
		o.ErrorCode = "ProvisionedThroughputExceededException"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Transport{base: base, model: NewModel(l), opts: o, sizes: make(map[string]int)}
}

// Model returns the model the Transport charges, for its statistics.
func (t *Transport) Model() *Model { return t.model }

// request is the part of a single-item request the model reads.
type request struct {
	TableName      string
	Key            Item
	Item           Item
	ConsistentRead bool
	ReturnValues   string
}

// answer is the part of an answer (or an error body) the model reads.
type answer struct {
	Type       string `json:"__type"`
	Item       Item
	Attributes Item
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := dynamowire.Operation(req)
	kind := Write
	switch op {
	case "GetItem":
		kind = Read
	case "PutItem", "UpdateItem", "DeleteItem":
	default:
		return t.base.RoundTrip(req)
	}
	req, body, err := dynamowire.ReadBody(req)
	if err != nil {
		return nil, err
	}
	var in request
	if err := json.Unmarshal(body, &in); err != nil {
		return t.base.RoundTrip(req) // the server will reject it
	}
	key := in.Key
	if op == "PutItem" {
		key = Item{t.opts.PartitionKey: in.Item[t.opts.PartitionKey], t.opts.SortKey: in.Item[t.opts.SortKey]}
	}
	part := in.TableName + "|" + canonical(key[t.opts.PartitionKey])
	id := part + "|" + canonical(key[t.opts.SortKey])

	t.mu.Lock()
	old, known := t.sizes[id]
	t.mu.Unlock()
	newSize := old
	if op == "PutItem" {
		newSize = ItemSize(in.Item)
	}
	estimate := WriteUnits(max(old, newSize))
	if kind == Read {
		estimate = ReadUnits(old, in.ConsistentRead)
	}
	if !t.model.Admit(part, kind, estimate, t.opts.Now()) {
		return t.throttled(req, in.TableName, kind), nil
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		// Nothing is known to have been served; DynamoDB charges a request
		// it applied whose answer was lost, so charge the estimate.
		t.model.Settle(part, kind, estimate, estimate, t.opts.Now())
		return nil, err
	}
	if resp.Header.Get("Content-Encoding") != "" {
		t.model.Settle(part, kind, estimate, estimate, t.opts.Now())
		return resp, nil
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.model.Settle(part, kind, estimate, estimate, t.opts.Now())
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	var out answer
	_ = json.Unmarshal(raw, &out)
	now := t.opts.Now()
	switch {
	case resp.StatusCode == http.StatusOK:
		switch op {
		case "GetItem":
			size := 0
			if out.Item != nil {
				size = ItemSize(out.Item)
			}
			t.remember(id, size, out.Item != nil)
			t.model.Settle(part, Read, estimate, ReadUnits(size, in.ConsistentRead), now)
		case "PutItem":
			t.remember(id, newSize, true)
			t.model.Settle(part, Write, estimate, WriteUnits(max(old, newSize)), now)
		case "UpdateItem":
			if out.Attributes != nil && strings.EqualFold(in.ReturnValues, "ALL_NEW") {
				newSize = ItemSize(out.Attributes)
				t.remember(id, newSize, true)
			} else if !known {
				// Created by this update, size unknown: until a read tells,
				// count it as the smallest item.
				t.remember(id, 1, true)
			}
			t.model.Settle(part, Write, estimate, WriteUnits(max(old, newSize)), now)
		case "DeleteItem":
			t.remember(id, 0, false)
			t.model.Settle(part, Write, estimate, WriteUnits(old), now)
		}
	case strings.HasSuffix(out.Type, "ConditionalCheckFailedException"):
		// A failed condition still consumes write capacity, on the item as
		// it stands.
		if out.Item != nil {
			old = ItemSize(out.Item)
			t.remember(id, old, true)
		}
		t.model.Settle(part, Write, estimate, WriteUnits(old), now)
	default:
		// Refused by the server (a bad request, a fault): nothing consumed.
		t.model.Settle(part, kind, estimate, 0, now)
	}
	return resp, nil
}

func (t *Transport) remember(id string, size int, exists bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if exists {
		t.sizes[id] = size
	} else {
		delete(t.sizes, id)
	}
}

// canonical is a value's JSON with sorted keys.
func canonical(v Value) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// throttled is DynamoDB's answer to a request over its partition's limit.
func (t *Transport) throttled(req *http.Request, table string, kind Kind) *http.Response {
	reason := "TableWriteKeyRangeThroughputExceeded"
	if kind == Read {
		reason = "TableReadKeyRangeThroughputExceeded"
	}
	body := dynamowire.Error(t.opts.ErrorCode,
		"Throughput exceeds the current capacity for one or more partitions of your table (partitionmodel). Consider spreading the requests over more partition keys.",
		map[string]any{"ThrottlingReasons": []map[string]string{{
			"reason":   reason,
			"resource": fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s", table),
		}}})
	return dynamowire.ErrorResponse(req, http.StatusBadRequest, "PARTITIONMODEL", body)
}
