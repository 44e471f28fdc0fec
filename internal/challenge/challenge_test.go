package challenge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	t0     = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
)

// solved issues a challenge of program p with bits at t0 and solves it.
func solved(t testing.TB, p string, bits int) (string, string) {
	t.Helper()
	c, exp, err := Issue(secret, p, bits, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(Lifetime); !exp.Equal(want) {
		t.Fatalf("expires %v, want %v", exp, want)
	}
	s, _, err := Solve(context.Background(), c, bits)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestVerify(t *testing.T) {
	c, s := solved(t, "gala", 12)
	wrong := "x"
	for ZeroBits(c, wrong) >= 12 {
		wrong += "x"
	}
	flip := []byte(c)
	flip[30] = map[bool]byte{true: 'B', false: 'A'}[flip[30] == 'A'] // a nonce bit
	tests := []struct {
		name               string
		secret             []byte
		program, chal, sol string
		now                time.Time
		want               error
	}{
		{"solved", secret, "gala", c, s, t0, nil},
		{"just before expiry", secret, "gala", c, s, t0.Add(Lifetime - time.Millisecond), nil},
		{"at expiry", secret, "gala", c, s, t0.Add(Lifetime), ErrExpired},
		{"issued in the future", secret, "gala", c, s, t0.Add(-time.Minute), ErrExpired},
		{"foreign program", secret, "gal", c, s, t0, ErrForged},
		{"other secret", []byte(strings.Repeat("k", 32)), "gala", c, s, t0, ErrForged},
		{"short secret", secret[:31], "gala", c, s, t0, ErrForged},
		{"tampered", secret, "gala", string(flip), s, t0, ErrForged},
		{"wrong solution", secret, "gala", c, wrong, t0, ErrSolution},
		{"empty solution", secret, "gala", c, "", t0, ErrMalformed},
		{"solution too long", secret, "gala", c, strings.Repeat("a", MaxSolutionLen+1), t0, ErrMalformed},
		{"solution with a dot", secret, "gala", c, "a.b", t0, ErrMalformed},
		{"truncated", secret, "gala", c[:len(c)-1], s, t0, ErrMalformed},
		{"padded", secret, "gala", c + "=", s, t0, ErrMalformed},
		{"not base64url", secret, "gala", strings.Repeat("+", EncodedLen), s, t0, ErrMalformed},
		{"empty", secret, "gala", "", s, t0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Verify(tt.secret, tt.program, tt.chal, tt.sol, tt.now)
			if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if err == nil && (got.Bits != 12 || !got.ExpiresAt.Equal(t0.Add(Lifetime))) {
				t.Errorf("Verify = %+v, want 12 bits expiring at %v", got, t0.Add(Lifetime))
			}
		})
	}
}

func TestIssueIsRandom(t *testing.T) {
	a, _, _ := Issue(secret, "gala", 8, t0)
	b, _, _ := Issue(secret, "gala", 8, t0)
	if a == b || len(a) != EncodedLen {
		t.Fatalf("two challenges %q and %q: want distinct, %d characters", a, b, EncodedLen)
	}
}

func TestIssueRefuses(t *testing.T) {
	for _, tt := range []struct {
		secret []byte
		bits   int
	}{{secret[:31], 8}, {secret, -1}, {secret, MaxBits + 1}} {
		if _, _, err := Issue(tt.secret, "gala", tt.bits, t0); err == nil {
			t.Errorf("Issue(%d-byte secret, %d bits) = nil error", len(tt.secret), tt.bits)
		}
	}
}

func TestSolveMeetsBits(t *testing.T) {
	for _, bits := range []int{0, 1, 8, 14} {
		c, s := solved(t, "gala", bits)
		if got := ZeroBits(c, s); got < bits || !ValidSolution(s) {
			t.Errorf("bits=%d: solution %q has %d zero bits", bits, s, got)
		}
	}
}

func TestSolveStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, _, _ := Issue(secret, "gala", MaxBits, t0)
	if _, _, err := Solve(ctx, c, MaxBits); !errors.Is(err, context.Canceled) {
		t.Fatalf("Solve = %v, want context.Canceled", err)
	}
}

func TestLeadingZeros(t *testing.T) {
	sum := make([]byte, 32)
	if got := leadingZeros(sum); got != 256 {
		t.Errorf("all zero: %d", got)
	}
	sum[9] = 0x10
	if got := leadingZeros(sum); got != 75 {
		t.Errorf("0x10 in byte 9: %d, want 75", got)
	}
}

func TestNextCounts(t *testing.T) {
	d := []int{len(alphabet) - 1, len(alphabet) - 1}
	next(&d)
	if !slices.Equal(d, []int{0, 0, 0}) {
		t.Errorf("next = %v", d)
	}
}

// issuedAtT0 is a challenge of "gala" for 10 bits, issued at t0 under secret.
const issuedAtT0 = "AQoAAAGiMQwBACnaAEM4WT2Ob7WKVZhAukcBJ3-BQk2BrVpaodZKjmak"

// FuzzOpen: no input panics, and only an issued challenge opens.
func FuzzOpen(f *testing.F) {
	const c = issuedAtT0 // a fixed one: fuzz workers run in other processes
	if _, err := Open(secret, "gala", c, t0); err != nil {
		f.Fatal(err)
	}
	f.Add("gala", c)
	f.Add("gala", strings.Repeat("A", EncodedLen))
	f.Fuzz(func(t *testing.T, program, s string) {
		if _, err := Open(secret, program, s, t0); err == nil && (s != c || program != "gala") {
			t.Fatalf("Open(%q, %q) accepted a challenge never issued", program, s)
		}
	})
}

// BenchmarkSolve solves a fresh challenge per iteration, for bits 14 to
// 22, and reports the median time per solve (median-ms), the mean number
// of hashes (hashes/op) and the time per hash (ns/hash): docs/benchmarks.md,
// "Proof of work".
func BenchmarkSolve(b *testing.B) {
	for bits := 14; bits <= 22; bits++ {
		b.Run("bits="+itoa(bits), func(b *testing.B) {
			var times []time.Duration
			var hashes int64
			for b.Loop() {
				c, _, err := Issue(secret, "bench", bits, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				_, n, err := Solve(context.Background(), c, bits)
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				hashes += n
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(hashes)/float64(len(times)), "hashes/op")
			var total time.Duration
			for _, d := range times {
				total += d
			}
			b.ReportMetric(float64(total)/float64(hashes), "ns/hash")
		})
	}
}

func itoa(n int) string { return string(rune('0'+n/10)) + string(rune('0'+n%10)) }
