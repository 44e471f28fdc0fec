// Package store names the errors every store of the waiting room answers
// (dynamostore on DynamoDB, memstore in memory), so that the domain's
// packages (queue, capacity) tell them apart with errors.Is. Package queue
// re-exports them under the same names (queue.ErrNotFound is
// store.ErrNotFound), as its Store's callers know them.
//
// Invariant: a store answers one of these for the case it names and only
// for it; anything else is a fault of the store, worth a retry.
package store

import "errors"

var (
	// ErrNotFound means the item does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict means a conditional write found the item changed or
	// already present.
	ErrConflict = errors.New("store: condition failed")
	// ErrClosed means an issue of tickets found the program closed to
	// entries.
	ErrClosed = errors.New("store: program closed")
	// ErrThrottled marks a store fault caused by the store's throughput
	// limit on one item, after every retry. Clients see it as any other
	// fault; package tickets takes it as a sign to use more shards.
	ErrThrottled = errors.New("store: throughput exceeded")
	// ErrDeleted means a program's creation found its id deleted less
	// than the retention ago (queue.Store.DeleteProgram).
	ErrDeleted = errors.New("store: program deleted")
)
