package main

import (
	"context"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
)

// openStore returns the in-memory store, or the DynamoDB one when an
// endpoint is configured.
func openStore(ctx context.Context, cfg config.Config, createTable bool) (queue.Store, error) {
	if cfg.DynamoEndpoint == "" {
		return memstore.New(), nil
	}
	return openDynamo(ctx, cfg, createTable)
}
