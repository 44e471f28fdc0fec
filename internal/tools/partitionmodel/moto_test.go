package partitionmodel_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

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
	tr := partitionmodel.New(nil, partitionmodel.Limits{WriteUnits: 12, ReadUnits: 100}, partitionmodel.Options{Now: func() time.Time { return frozen }})
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
