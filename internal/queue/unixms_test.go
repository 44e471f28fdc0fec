package queue_test

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// The zero time and 0 stand for each other (an absent time in the store);
// every other time is its Unix ms, rounded down, read back in UTC.
func TestUnixMs(t *testing.T) {
	tests := []struct {
		name     string
		t        time.Time
		ms       int64
		readBack time.Time
	}{
		{"Zero", time.Time{}, 0, time.Time{}},
		{"Epoch", time.Unix(0, 0), 0, time.Time{}},
		{"RoundedDown", time.Date(2026, 3, 1, 12, 0, 0, 1_999_999, time.UTC), 1772366400001, time.Date(2026, 3, 1, 12, 0, 0, 1_000_000, time.UTC)},
		{"InUTC", time.Date(2026, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600)), 1772366400000, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		{"BeforeEpoch", time.UnixMilli(-5).UTC(), -5, time.UnixMilli(-5).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queue.UnixMs(tt.t); got != tt.ms {
				t.Errorf("UnixMs(%v) = %d, want %d", tt.t, got, tt.ms)
			}
			got := queue.FromUnixMs(tt.ms)
			if !got.Equal(tt.readBack) || got.Location() != time.UTC {
				t.Errorf("FromUnixMs(%d) = %v, want %v in UTC", tt.ms, got, tt.readBack)
			}
		})
	}
}
