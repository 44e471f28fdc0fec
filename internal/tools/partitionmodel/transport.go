package partitionmodel

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/tools/dynamowire"
)

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
// under limits l, on the clock now (time.Now if nil).
func New(base http.RoundTripper, l Limits, now func() time.Time) *Transport {
	if now == nil {
		now = time.Now
	}
	return &Transport{base: cmp.Or[http.RoundTripper](base, http.DefaultTransport), model: NewModel(l), now: now, sizes: map[string]int{}}
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
	// An answer lost or unread is charged the estimate: DynamoDB charges a
	// request it applied whose answer was lost.
	actual := c.estimate
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.Header.Get("Content-Encoding") == "" {
		var raw []byte
		raw, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			var out answer
			_ = json.Unmarshal(raw, &out)
			actual = t.consumed(c, resp.StatusCode, out)
		}
	}
	t.model.Settle(c.part, kind, c.estimate, actual, t.now())
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// charge is a single-item request as charged before its answer: its
// partition and item, the item's known size and the estimated units.
type charge struct {
	op       string
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
	c := charge{op: op, in: in, part: in.TableName + "|" + canonical(key["pk"])}
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

// consumed is the units c consumed by its answer (status, out), 0 when the
// server refused it (a bad request, a fault); it remembers the item's size.
func (t *Transport) consumed(c charge, status int, out answer) float64 {
	switch {
	case status == http.StatusOK:
		switch c.op {
		case "GetItem":
			size := ItemSize(out.Item)
			t.remember(c.id, size, out.Item != nil)
			return ReadUnits(size, c.in.ConsistentRead)
		case "PutItem":
			t.remember(c.id, c.newSize, true)
			return WriteUnits(max(c.old, c.newSize))
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
			return WriteUnits(max(c.old, newSize))
		}
		t.remember(c.id, 0, false) // DeleteItem
		return WriteUnits(c.old)
	case strings.HasSuffix(out.Type, "ConditionalCheckFailedException"):
		// A failed condition still consumes write capacity, on the item as
		// it stands.
		old := c.old
		if out.Item != nil {
			old = ItemSize(out.Item)
			t.remember(c.id, old, true)
		}
		return WriteUnits(old)
	}
	return 0
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
