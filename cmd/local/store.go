package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/tools/localdynamo"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// defaultLocalTable is the table used on a DynamoDB API when TABLE_NAME is unset.
const defaultLocalTable = "waiting-room"

// openStore builds the App with opts on the in-memory store or on a DynamoDB API, and returns the
// store's description, the -partition-limits model (or nil) and a function that closes what it started.
func openStore(ctx context.Context, cfg config.Config, f localFlags, s seams, log *slog.Logger, opts ...app.Option) (a *app.App, where string, model *partitionmodel.Model, stop func(), err error) {
	stop = func() {}
	if f.dynamo == "" && cfg.DynamoEndpoint == "" {
		if f.partitionLimits != "" {
			return nil, "", nil, stop, fmt.Errorf("-partition-limits needs a DynamoDB API: -dynamo, or %s", config.EnvDynamoEndpoint)
		}
		// One process, no per-item write limit: no ticket shards.
		opts = append(opts, app.WithItemWriteLimit(0))
		return app.New(cfg, memstore.New(), log, opts...), "memory", nil, stop, nil
	}
	var limits partitionmodel.Limits
	if f.partitionLimits != "" {
		if limits, err = partitionmodel.ParseSpec(f.partitionLimits); err != nil {
			return nil, "", nil, stop, fmt.Errorf("-partition-limits: %w", err)
		}
	}
	if f.dynamo != "" && cfg.DynamoEndpoint != "" {
		return nil, "", nil, stop, fmt.Errorf("-dynamo %s and %s=%s: choose one", f.dynamo, config.EnvDynamoEndpoint, cfg.DynamoEndpoint)
	}
	cfg.TableName = cmp.Or(cfg.TableName, defaultLocalTable)
	endpoint := cfg.DynamoEndpoint
	var local *localdynamo.Server
	switch {
	case f.dynamo != "":
		local, err = localdynamo.Start(ctx, localdynamo.Options{Server: f.dynamo, Serialize: f.dynamo == "moto"})
		f.createTable = true
	case localdynamo.IsMoto(ctx, endpoint):
		// moto's conditional updates are not atomic: serialise its requests.
		local, err = localdynamo.Proxy(endpoint)
	}
	if err != nil {
		return nil, "", nil, stop, fmt.Errorf("local DynamoDB API: %w", err)
	}
	where = fmt.Sprintf("DynamoDB table %s at %s", cfg.TableName, endpoint)
	if local != nil {
		stop = local.Stop
		cfg.DynamoEndpoint = local.Endpoint()
		if f.dynamo != "" {
			where = fmt.Sprintf("DynamoDB table %s on a %s it started at %s", cfg.TableName, f.dynamo, cfg.DynamoEndpoint)
		} else {
			where += fmt.Sprintf(" (moto, through a proxy at %s that serialises its requests)", cfg.DynamoEndpoint)
		}
	}
	copts := dynamostore.ClientOptions{Endpoint: cfg.DynamoEndpoint, Backoff: s.dynamo.Backoff, AttemptTimeout: s.dynamo.AttemptTimeout}
	if f.partitionLimits != "" {
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 256
		tr := partitionmodel.New(base, limits, s.partitionNow)
		model = tr.Model()
		copts.Transport = tr
		where += fmt.Sprintf("; per-partition limits %s a second", limits)
		// Size the ticket shards for the scaled item limit.
		opts = append(opts, app.WithItemWriteLimit(limits.WriteUnits))
	}
	client, err := dynamostore.NewClientWithOptions(ctx, copts)
	if err == nil {
		err = ensureTable(ctx, client, cfg.TableName, endpoint, f.createTable, log)
	}
	if err != nil {
		stop()
		return nil, "", nil, func() {}, err
	}
	return app.NewDynamo(cfg, client, log, opts...), where, model, stop, nil
}

// ensureTable creates table, or checks that it exists, so that a missing one is reported at start.
func ensureTable(ctx context.Context, client *dynamodb.Client, table, endpoint string, create bool, log *slog.Logger) error {
	if create {
		err := localdynamo.CreateTable(ctx, client, table)
		if errors.Is(err, localdynamo.ErrNoTTL) {
			log.Warn("the DynamoDB API has no TTL: ended tokens stay in the table", "table", table)
			return nil
		}
		return err
	}
	_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("no table %s on the DynamoDB API at %s: start with -create-table to create it, or set %s to an existing table", table, endpoint, config.EnvTableName)
	case err != nil:
		return fmt.Errorf("the DynamoDB API at %s: %w", endpoint, err)
	}
	return nil
}
