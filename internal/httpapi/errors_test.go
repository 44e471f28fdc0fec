package httpapi

import (
	"testing"

	"github.com/example/waitingroom/internal/queue"
)

// TestEveryKindHasAStatus: an error kind without a row in statusOf would
// answer 500 for what may be a client's mistake.
func TestEveryKindHasAStatus(t *testing.T) {
	for k := queue.KindInternal; k <= queue.KindTooLarge; k++ {
		if _, ok := statusOf[k]; !ok {
			t.Errorf("kind %d has no HTTP status in statusOf", k)
		}
	}
}
