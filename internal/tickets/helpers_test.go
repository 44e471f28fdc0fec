package tickets_test

import (
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// store is a queue store with ticket shards.
type store interface {
	queue.Store
	tickets.Store
}

// instance is one function instance: a Service over st with a program
// cache of a second, whose ticket shards (for items of units write units
// a second) share its clock and, if not nil, its rng.
func instance(st store, clk clock.Clock, rng *rand.Rand, units float64, opts ...queue.Option) (*queue.Service, *tickets.Shards) {
	topts := []tickets.Option{tickets.WithItemWriteLimit(units), tickets.WithClock(clk)}
	sopts := []queue.Option{queue.WithClock(clk), queue.WithProgramCache(time.Second)}
	if rng != nil {
		topts, sopts = append(topts, tickets.WithRand(rng)), append(sopts, queue.WithRand(rng))
	}
	shards := tickets.New(st, topts...)
	return queue.NewService(st, polling.DefaultTiers(), append(append(sopts, queue.WithTickets(shards)), opts...)...), shards
}
