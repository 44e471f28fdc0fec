package pace

import (
	"math"
	"math/bits"
	"time"
)

// MulDiv returns a×b/c (c > 0) rounded down or up, math.MaxInt64 and
// false beyond int64.
func MulDiv(a, b, c uint64, up bool) (int64, bool) {
	hi, lo := bits.Mul64(a, b)
	if up {
		var carry uint64
		lo, carry = bits.Add64(lo, c-1, 0)
		hi += carry
	}
	if hi >= c {
		return math.MaxInt64, false
	}
	q, _ := bits.Div64(hi, lo, c)
	if q > math.MaxInt64 {
		return math.MaxInt64, false
	}
	return int64(q), true
}

// MulSat returns a×b for a, b ≥ 0, saturating at math.MaxInt64.
func MulSat(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// AddSat returns a+b for b ≥ 0, saturating at math.MaxInt64.
func AddSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

const nsPerMs = int64(time.Millisecond)

// MsToNs returns ms in nanoseconds, saturating at the int64 bounds.
func MsToNs(ms int64) int64 {
	switch {
	case ms > math.MaxInt64/nsPerMs:
		return math.MaxInt64
	case ms < math.MinInt64/nsPerMs:
		return math.MinInt64
	}
	return ms * nsPerMs
}

// NsToMs returns ns in milliseconds, rounded down.
func NsToMs(ns int64) int64 { return time.Unix(0, ns).UnixMilli() }

// UnixMs is t in Unix milliseconds, rounded down; the zero time is 0.
func UnixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromUnixMs is the inverse of UnixMs, in UTC: 0 is the zero time.
func FromUnixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
