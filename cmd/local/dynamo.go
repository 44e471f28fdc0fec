package main

import (
	"context"
	"fmt"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/queue"
)

// defaultLocalTable is the table used against a local DynamoDB API when
// TABLE_NAME is unset.
const defaultLocalTable = "waiting-room"

// openDynamo connects to the DynamoDB API at cfg.DynamoEndpoint, creating
// the table first if asked.
func openDynamo(ctx context.Context, cfg config.Config, createTable bool) (queue.Store, error) {
	table := cfg.TableName
	if table == "" {
		table = defaultLocalTable
	}
	client, err := dynamostore.NewClient(ctx, cfg.DynamoEndpoint)
	if err != nil {
		return nil, fmt.Errorf("dynamodb client: %w", err)
	}
	if createTable {
		if err := dynamostore.CreateTable(ctx, client, table); err != nil {
			return nil, fmt.Errorf("create table %s: %w", table, err)
		}
	}
	return dynamostore.New(client, table), nil
}
