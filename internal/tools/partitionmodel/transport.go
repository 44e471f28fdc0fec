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

	"github.com/example/waitingroom/internal/tools/dynamowire"
)

// Options configure a Transport.
type Options struct {
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Transport is an http.RoundTripper in front of a DynamoDB API server that
// applies a Model to every single-item request of this project's table
// (key pk and sk) and passes every other request through uncharged. It is
// safe for concurrent use.
type Transport struct {
	base  http.RoundTripper
	model *Model
	now   func() time.Time

	mu    sync.Mutex
	sizes map[string]int // item key → last known size in bytes
}

// New returns a Transport forwarding to base (http.DefaultTransport if nil)
// under limits l.
func New(base http.RoundTripper, l Limits, o Options) *Transport {
	t := &Transport{base: base, model: NewModel(l), now: o.Now, sizes: map[string]int{}}
	if base == nil {
		t.base = http.DefaultTransport
	}
	if o.Now == nil {
		t.now = time.Now
	}
	return t
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
	c := t.estimate(op, kind, in)
	if !t.model.Admit(c.part, kind, c.estimate, t.now()) {
		return t.throttled(req, in.TableName, kind), nil
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.Header.Get("Content-Encoding") == "" {
		var raw []byte
		raw, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			var out answer
			_ = json.Unmarshal(raw, &out)
			t.settle(c, resp.StatusCode, out)
			return resp, nil
		}
	}
	// The answer is lost or unread: DynamoDB charges a request it applied
	// whose answer was lost, so charge the estimate.
	t.model.Settle(c.part, kind, c.estimate, c.estimate, t.now())
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// charge is a single-item request as charged before its answer: its
// partition and item, the item's known size and the estimated units.
type charge struct {
	op       string
	kind     Kind
	in       request
	part, id string
	old      int // the item's last known size
	known    bool
	newSize  int // the item's size after a PutItem
	estimate float64
}

// estimate is the charge of request in, calling op, before its answer.
func (t *Transport) estimate(op string, kind Kind, in request) charge {
	key := in.Key
	if op == "PutItem" {
		key = Item{"pk": in.Item["pk"], "sk": in.Item["sk"]}
	}
	c := charge{op: op, kind: kind, in: in, part: in.TableName + "|" + canonical(key["pk"])}
	c.id = c.part + "|" + canonical(key["sk"])
	t.mu.Lock()
	c.old, c.known = t.sizes[c.id]
	t.mu.Unlock()
	c.newSize = c.old
	if op == "PutItem" {
		c.newSize = ItemSize(in.Item)
	}
	c.estimate = WriteUnits(max(c.old, c.newSize))
	if kind == Read {
		c.estimate = ReadUnits(c.old, in.ConsistentRead)
	}
	return c
}

// settle charges c the units its answer (status, out) shows it consumed
// and remembers the item's size.
func (t *Transport) settle(c charge, status int, out answer) {
	now := t.now()
	switch {
	case status == http.StatusOK:
		switch c.op {
		case "GetItem":
			size := 0
			if out.Item != nil {
				size = ItemSize(out.Item)
			}
			t.remember(c.id, size, out.Item != nil)
			t.model.Settle(c.part, Read, c.estimate, ReadUnits(size, c.in.ConsistentRead), now)
		case "PutItem":
			t.remember(c.id, c.newSize, true)
			t.model.Settle(c.part, Write, c.estimate, WriteUnits(max(c.old, c.newSize)), now)
		case "UpdateItem":
			newSize := c.newSize
			if out.Attributes != nil && strings.EqualFold(c.in.ReturnValues, "ALL_NEW") {
				newSize = ItemSize(out.Attributes)
				t.remember(c.id, newSize, true)
			} else if !c.known {
				// Created by this update, size unknown: until a read tells,
				// count it as the smallest item.
				t.remember(c.id, 1, true)
			}
			t.model.Settle(c.part, Write, c.estimate, WriteUnits(max(c.old, newSize)), now)
		case "DeleteItem":
			t.remember(c.id, 0, false)
			t.model.Settle(c.part, Write, c.estimate, WriteUnits(c.old), now)
		}
	case strings.HasSuffix(out.Type, "ConditionalCheckFailedException"):
		// A failed condition still consumes write capacity, on the item as
		// it stands.
		old := c.old
		if out.Item != nil {
			old = ItemSize(out.Item)
			t.remember(c.id, old, true)
		}
		t.model.Settle(c.part, Write, c.estimate, WriteUnits(old), now)
	default:
		// Refused by the server (a bad request, a fault): nothing consumed.
		t.model.Settle(c.part, c.kind, c.estimate, 0, now)
	}
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
	body := dynamowire.Error("ProvisionedThroughputExceededException",
		"Throughput exceeds the current capacity for one or more partitions of your table (partitionmodel). Consider spreading the requests over more partition keys.",
		map[string]any{"ThrottlingReasons": []map[string]string{{
			"reason":   reason,
			"resource": fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s", table),
		}}})
	return dynamowire.ErrorResponse(req, http.StatusBadRequest, "PARTITIONMODEL", body)
}
