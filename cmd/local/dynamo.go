package main

import (
	"context"
	"errors"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/queue"
)

// openDynamo is filled in once dynamostore lands.
func openDynamo(ctx context.Context, cfg config.Config, createTable bool) (queue.Store, error) {
	return nil, errors.New("DYNAMODB_ENDPOINT support not built yet")
}
