package metrics

import (
	"io"
	"reflect"
	"testing"
	"time"
)

// TestNewEMFReadsTheRealClock: without WithEMFClock the lines are stamped
// by time.Now, the clock CloudWatch expects; the option replaces it.
func TestNewEMFReadsTheRealClock(t *testing.T) {
	funcOf := func(f func() time.Time) uintptr { return reflect.ValueOf(f).Pointer() }
	if got := NewEMF(io.Discard, "WaitingRoom").now; funcOf(got) != funcOf(time.Now) {
		t.Error("NewEMF stamps lines with another clock than time.Now")
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got := NewEMF(io.Discard, "WaitingRoom", WithEMFClock(func() time.Time { return at })).now(); !got.Equal(at) {
		t.Errorf("WithEMFClock: the sink reads %v, want %v", got, at)
	}
}
