package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
)

// openStore returns the in-memory store, or the DynamoDB one when an
// endpoint is configured.
func openStore(ctx context.Context, cfg config.Config, createTable bool, log *slog.Logger) (queue.Store, error) {
	if cfg.DynamoEndpoint == "" {
		return memstore.New(), nil
	}
	return openDynamo(ctx, cfg, createTable, log)
}

// defaultLocalTable is the table used against a local DynamoDB API when
// TABLE_NAME is unset.
const defaultLocalTable = "waiting-room"

// openDynamo connects to the DynamoDB API at cfg.DynamoEndpoint, creating
// the table first if asked.
func openDynamo(ctx context.Context, cfg config.Config, createTable bool, log *slog.Logger) (queue.Store, error) {
	table := cfg.TableName
	if table == "" {
		table = defaultLocalTable
	}
	client, err := dynamostore.NewClient(ctx, cfg.DynamoEndpoint)
	if err != nil {
		return nil, fmt.Errorf("dynamodb client: %w", err)
	}
	if createTable {
		err := dynamostore.CreateTable(ctx, client, table)
		switch {
		case errors.Is(err, dynamostore.ErrNoTTL):
			log.Warn("the DynamoDB API has no TTL: ended tokens stay in the table", "table", table)
		case err != nil:
			return nil, fmt.Errorf("create table %s: %w", table, err)
		}
	}
	return dynamostore.New(client, table), nil
}
