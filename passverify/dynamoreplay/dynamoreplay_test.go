package dynamoreplay_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/passverify"
	"github.com/example/waitingroom/passverify/dynamoreplay"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func newClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	client, err := dynamostore.NewClient(t.Context(), dynamotest.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newTable creates a table with dynamoreplay.CreateTable, deleted when t
// ends.
func newTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	table := "replay-" + rand.Text()[:12]
	if err := dynamoreplay.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
	return table
}

func TestGuard(t *testing.T) {
	client := newClient(t)
	passtest.ReplayGuardContract(t, func(t *testing.T) passverify.ReplayGuard {
		g, err := dynamoreplay.New(client, newTable(t, client), dynamoreplay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	})
}

// TestGuardItem: the item has the key and the TTL attribute the Options
// name, so that the guard can share a table.
func TestGuardItem(t *testing.T) {
	client := newClient(t)
	table := "replay-" + rand.Text()[:12]
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	g, err := dynamoreplay.New(client, table, dynamoreplay.Options{KeyAttribute: "id", TTLAttribute: "ttl", KeyPrefix: "shop#pass#"})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Date(2026, 5, 19, 10, 22, 31, 0, time.UTC)
	for _, want := range []bool{true, false} {
		if first, err := g.FirstUse(t.Context(), "jti-1", until); err != nil || first != want {
			t.Fatalf("FirstUse = %v, %v; want %v", first, err, want)
		}
	}
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "shop#pass#jti-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "shop#pass#jti-1", "ttl": strconv.FormatInt(until.Unix()+1, 10)}
	got := map[string]string{}
	for k, v := range out.Item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			got[k] = v.Value
		case *types.AttributeValueMemberN:
			got[k] = v.Value
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("item (-want +got):\n%s", diff)
	}
}

func TestGuardStoreFault(t *testing.T) {
	client := newClient(t)
	g, err := dynamoreplay.New(client, "no-such-table-"+rand.Text()[:8], dynamoreplay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := g.FirstUse(t.Context(), "jti", time.Now().Add(time.Hour)); err == nil || first {
		t.Errorf("FirstUse on a missing table = %v, %v; want an error", first, err)
	}
}
