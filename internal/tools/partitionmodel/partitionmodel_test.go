package partitionmodel_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tools/dynamowire"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

func item(t *testing.T, js string) partitionmodel.Item {
	t.Helper()
	var it partitionmodel.Item
	if err := json.Unmarshal([]byte(js), &it); err != nil {
		t.Fatal(err)
	}
	return it
}

func TestItemSize(t *testing.T) {
	tests := []struct {
		name string
		item string
		want int
	}{
		{"string", `{"ab":{"S":"héllo"}}`, 2 + 6},
		{"number: two digits a byte, plus one", `{"n":{"N":"12345"}}`, 1 + 3 + 1},
		{"number: zeros trimmed", `{"n":{"N":"120000"}}`, 1 + 1 + 1},
		{"number: leading zeros and the point", `{"n":{"N":"0.0012"}}`, 1 + 1 + 1},
		{"negative number", `{"n":{"N":"-7"}}`, 1 + 1 + 1},
		{"binary: raw bytes", `{"b":{"B":"AAECAw=="}}`, 1 + 4},
		{"bool and null", `{"t":{"BOOL":true},"z":{"NULL":true}}`, 2 + 2},
		{"list: 3 bytes, 1 a member", `{"l":{"L":[{"S":"a"},{"S":"bc"}]}}`, 1 + 3 + (1 + 1) + (1 + 2)},
		{"map: names count", `{"m":{"M":{"k":{"S":"v"}}}}`, 1 + 3 + 1 + 1 + 1},
		{"empty map", `{"m":{"M":{}}}`, 1 + 3},
		{"string set", `{"s":{"SS":["a","bcd"]}}`, 1 + 4},
		{"number set", `{"s":{"NS":["1","22"]}}`, 1 + 2 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partitionmodel.ItemSize(item(t, tt.item)); got != tt.want {
				t.Errorf("ItemSize(%s) = %d, want %d", tt.item, got, tt.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	for _, tt := range []struct {
		got, want float64
	}{
		{partitionmodel.WriteUnits(0), 1},
		{partitionmodel.WriteUnits(1024), 1},
		{partitionmodel.WriteUnits(1025), 2},
		{partitionmodel.WriteUnits(3000), 3},
		{partitionmodel.ReadUnits(0, true), 1},
		{partitionmodel.ReadUnits(4096, true), 1},
		{partitionmodel.ReadUnits(4097, true), 2},
		{partitionmodel.ReadUnits(4097, false), 1},
		{partitionmodel.ReadUnits(100, false), 0.5},
	} {
		if tt.got != tt.want {
			t.Errorf("got %g units, want %g", tt.got, tt.want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    partitionmodel.Limits
		wantErr bool
	}{
		{"", partitionmodel.AWS, false},
		{"aws", partitionmodel.AWS, false},
		{"scale=0.1", partitionmodel.Limits{WriteUnits: 100, ReadUnits: 300}, false},
		{"scale=0.1,write=50", partitionmodel.Limits{WriteUnits: 50, ReadUnits: 300}, false},
		{"write=10, read=20", partitionmodel.Limits{WriteUnits: 10, ReadUnits: 20}, false},
		{"scale=0", partitionmodel.Limits{}, true},
		{"scale=-1", partitionmodel.Limits{}, true},
		{"speed=2", partitionmodel.Limits{}, true},
		{"scale", partitionmodel.Limits{}, true},
	}
	for _, tt := range tests {
		got, err := partitionmodel.ParseSpec(tt.spec)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v, error %v", tt.spec, got, err, tt.want, tt.wantErr)
		}
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestModelBuckets: a partition takes one second of its rate at once,
// then refills at the rate; reads and writes and partitions are
// independent.
func TestModelBuckets(t *testing.T) {
	m := partitionmodel.NewModel(partitionmodel.AWS.Scaled(0.1)) // 100 WCU, 300 RCU
	took := func(key string, kind partitionmodel.Kind, n int, at time.Time) int {
		ok := 0
		for range n {
			if m.Take(key, kind, 1, at) {
				ok++
			}
		}
		return ok
	}
	if got := took("hot", partitionmodel.Write, 150, t0); got != 100 {
		t.Errorf("a burst of 150 writes: %d taken, want 100 (one second's worth)", got)
	}
	if got := took("hot", partitionmodel.Write, 100, t0.Add(500*time.Millisecond)); got != 50 {
		t.Errorf("half a second later: %d taken, want 50", got)
	}
	if got := took("hot", partitionmodel.Read, 300, t0.Add(500*time.Millisecond)); got != 300 {
		t.Errorf("reads of the hot partition: %d taken, want 300 (reads and writes are apart)", got)
	}
	if got := took("cold", partitionmodel.Write, 100, t0); got != 100 {
		t.Errorf("another partition: %d taken, want 100", got)
	}
	if got := took("hot", partitionmodel.Write, 200, t0.Add(time.Hour)); got != 100 {
		t.Errorf("after an idle hour: %d taken, want 100 (no more than one second is kept)", got)
	}
	st := m.Stats()
	if st[0].Key != "hot" || st[0].Writes != 250 || st[0].ThrottledWrites != 200 || st[0].MaxWritesPerSecond != 150 {
		t.Errorf("stats of the hot partition: %+v, want 250 writes, 200 throttled, at most 150 in a second", st[0])
	}
}

// fakeDynamo answers single-item requests from a fixed item and counts
// the requests that reach it.
type fakeDynamo struct {
	item     string // the item every read returns and every ALL_NEW update answers
	failCond atomic.Bool
	hits     atomic.Int32
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if f.failCond.Load() {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"failed","Item":` + f.item + `}`))
		return
	}
	switch dynamowire.Operation(r) {
	case "GetItem":
		_, _ = w.Write([]byte(`{"Item":` + f.item + `}`))
	case "UpdateItem":
		_, _ = w.Write([]byte(`{"Attributes":` + f.item + `}`))
	default:
		_, _ = w.Write([]byte(`{}`))
	}
}

// bigItem is an item of about size bytes with key pk.
func bigItem(pk string, size int) string {
	return `{"pk":{"S":"` + pk + `"},"sk":{"S":"X"},"pad":{"S":"` + strings.Repeat("x", size) + `"}}`
}

type frozenClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *frozenClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *frozenClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClient(t *testing.T, l partitionmodel.Limits, fake *fakeDynamo, clock *frozenClock) (*dynamodb.Client, *partitionmodel.Transport) {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	tr := partitionmodel.New(nil, l, clock.Now)
	client := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:       &http.Client{Transport: tr},
		RetryMaxAttempts: 1,
	})
	return client, tr
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "X"}}
}

// TestTransportThrottles: an item of 2.5 KB costs 3 write units a put;
// the fourth put in a second to a 10-unit partition is answered with
// DynamoDB's throttling error without reaching the server, and another
// partition is unaffected.
func TestTransportThrottles(t *testing.T) {
	fake := &fakeDynamo{item: bigItem("hot", 2500)}
	clock := &frozenClock{now: t0}
	client, tr := newClient(t, partitionmodel.Limits{WriteUnits: 10, ReadUnits: 30}, fake, clock)
	put := func(pk string) error {
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName: aws.String("tbl"),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "X"},
				"pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", 2500)},
			},
		})
		return err
	}
	for i := range 3 {
		if err := put("hot"); err != nil {
			t.Fatalf("put %d: %v", i+1, err)
		}
	}
	err := put("hot")
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("fourth put: %v, want ProvisionedThroughputExceededException", err)
	}
	if len(pte.ThrottlingReasons) != 1 || aws.ToString(pte.ThrottlingReasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" ||
		!strings.HasSuffix(aws.ToString(pte.ThrottlingReasons[0].Resource), ":table/tbl") {
		t.Errorf("throttling reasons %+v, want TableWriteKeyRangeThroughputExceeded on table/tbl", pte.ThrottlingReasons)
	}
	if got := fake.hits.Load(); got != 3 {
		t.Errorf("%d requests reached the server, want 3 (a throttled one does not)", got)
	}
	if err := put("cold"); err != nil {
		t.Errorf("another partition: %v", err)
	}
	clock.Add(300 * time.Millisecond) // 3 units back
	if err := put("hot"); err != nil {
		t.Errorf("after 300 ms: %v", err)
	}
	st := tr.Model().Stats()
	if st[0].WriteUnits != 12 || st[0].ThrottledWrites != 1 {
		t.Errorf("hot partition: %+v, want 12 write units, 1 throttled", st[0])
	}
}

// TestTransportUnits: an update is charged on the larger of the item
// before and after (its ALL_NEW answer), a failed condition on the item as
// it stands, a read by 4 KB and half for an eventually consistent one.
func TestTransportUnits(t *testing.T) {
	fake := &fakeDynamo{item: bigItem("p", 3000)}
	clock := &frozenClock{now: t0}
	client, tr := newClient(t, partitionmodel.AWS, fake, clock)
	ctx := t.Context()
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String("tbl"), Key: key("p"), UpdateExpression: aws.String("SET a = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues:              types.ReturnValueAllNew,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: key("p"), ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: key("p")}); err != nil {
		t.Fatal(err)
	}
	fake.failCond.Store(true)
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String("tbl"), Key: key("p"), UpdateExpression: aws.String("SET a = :a"),
		ConditionExpression:                 aws.String("a = :a"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional update: %v", err)
	}
	st := tr.Model().Stats()[0]
	if st.Writes != 2 || st.WriteUnits != 3+3 || st.Reads != 2 || st.ReadUnits != 1+0.5 {
		t.Errorf("stats %+v, want 2 writes of 3 units, reads of 1 and 0.5 units", st)
	}
}

// TestSDKRetriesThrottles: the SDK's standard retryer classifies the
// model's answer as a throttle and tries again.
func TestSDKRetriesThrottles(t *testing.T) {
	fake := &fakeDynamo{item: bigItem("p", 10)}
	clock := &frozenClock{now: t0}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	tr := partitionmodel.New(nil, partitionmodel.Limits{WriteUnits: 1, ReadUnits: 1}, clock.Now)
	var attempts atomic.Int32
	counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		return tr.RoundTrip(r)
	})
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:   &http.Client{Transport: counting},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.MaxBackoff = time.Millisecond
		}),
	})
	put := func() error {
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: key("p")})
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	err := put()
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("second put within the second: %v, want the throttling error after retries", err)
	}
	if got := attempts.Load(); got != 4 {
		t.Errorf("%d attempts, want 1 + 3 (the throttled call retried twice)", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestItemSizeOf: the SDK's form of an item has the size of its JSON form.
func TestItemSizeOf(t *testing.T) {
	js := `{"s":{"S":"héllo"},"n":{"N":"12345"},"b":{"B":"AAECAw=="},"t":{"BOOL":true},"l":{"L":[{"S":"a"},{"N":"1"}]},"m":{"M":{"k":{"S":"v"}}},"ss":{"SS":["a","bc"]}}`
	av := map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "héllo"}, "n": &types.AttributeValueMemberN{Value: "12345"},
		"b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 3}}, "t": &types.AttributeValueMemberBOOL{Value: true},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberN{Value: "1"}}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}},
	}
	if got, want := partitionmodel.ItemSizeOf(av), partitionmodel.ItemSize(item(t, js)); got != want || got == 0 {
		t.Errorf("ItemSizeOf = %d, ItemSize of the JSON form = %d", got, want)
	}
}

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestOnDynamoAPI charges a real server's answers: a 5 KB item costs 5
// write units to put and to update (its ALL_NEW answer), 2 read units to
// read strongly; and the store's client, with its retry policy, gives up
// on a partition that stays over its limit with DynamoDB's error.
func TestOnDynamoAPI(t *testing.T) {
	endpoint := dynamotest.Endpoint(t)
	plain, err := dynamostore.NewClient(t.Context(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	table := dynamotest.NewTable(t, plain)
	// The model's clock does not move: no unit comes back once spent.
	frozen := time.Now()
	tr := partitionmodel.New(nil, partitionmodel.Limits{WriteUnits: 12, ReadUnits: 100}, func() time.Time { return frozen })
	client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{Endpoint: endpoint, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	k := key("big")
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"pk": k["pk"], "sk": k["sk"], "pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", 5000)},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: k, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: k, UpdateExpression: aws.String("SET n = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues:              types.ReturnValueAllNew,
	}); err != nil {
		t.Fatal(err)
	}
	st := tr.Model().Stats()[0]
	if st.WriteUnits != 10 || st.ReadUnits != 2 {
		t.Fatalf("stats %+v, want 5+5 write units and 2 read units", st)
	}
	// 2 units left, and no second passes: a third 5-unit write is
	// throttled at every try, and the client gives up with DynamoDB's error.
	var throttled int
	for range 2 {
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &table, Key: k, UpdateExpression: aws.String("SET n = n + :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "1"}},
		})
		var pte *types.ProvisionedThroughputExceededException
		switch {
		case errors.As(err, &pte):
			throttled++
		case err != nil:
			t.Fatal(err)
		}
	}
	if st := tr.Model().Stats()[0]; throttled != 2 || st.ThrottledWrites < 2 || st.WriteUnits != 10 {
		t.Errorf("two 5-unit writes to a spent 12-unit partition in one second: %d throttled (%+v), want both, every try", throttled, st)
	}
}
