package dynamostore

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/tickets"
)

// MaxCallDuration is the longest one call of a client with these options
// can take when its context has no deadline: every attempt timing out, with
// the longest backoff between them.
func (o ClientOptions) MaxCallDuration() time.Duration {
	o = o.withDefaults()
	return time.Duration(o.MaxAttempts)*o.AttemptTimeout + time.Duration(o.MaxAttempts-1)*o.MaxBackoff
}

// GetShard reads shard i of programID (strongly consistent); the zero
// Shard when it does not exist.
func (s *Store) GetShard(ctx context.Context, programID string, i int) (tickets.Shard, error) {
	item, err := s.getItem(ctx, shardKey(programID, i))
	it, err := decoded("get shard", unmarshal[shardItem], item, err)
	return it.shard(), err
}
