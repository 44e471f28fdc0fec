package shuffle_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math"
	"testing"

	"github.com/example/waitingroom/internal/shuffle"
)

// TestShuffleUniform: across many seeds, a ticket's place in a pre-queue
// of 40 is uniform over 1..40 (chi-square over the places of every
// ticket, 39 degrees of freedom), and a run's places are not correlated
// with the order of arrival (Spearman's rho averages 0 within its
// standard error).
func TestShuffleUniform(t *testing.T) {
	const n, runs = 40, 2_000
	counts := make([][]int, n) // [arrival][place-1]
	for i := range counts {
		counts[i] = make([]int, n)
	}
	var rhoSum float64
	for run := range runs {
		sum := sha256.Sum256(fmt.Appendf(nil, "seed %d", run))
		seed := base64.RawURLEncoding.EncodeToString(sum[:]) // a stand-in for a signature
		var d2 float64
		for arrival := range n {
			rank := int(shuffle.PlaceOf(seed, n, int64(arrival+1))) - 1
			counts[arrival][rank]++
			diff := float64(rank - arrival)
			d2 += diff * diff
		}
		rhoSum += 1 - 6*d2/float64(n*(n*n-1))
	}
	// Each arrival's places: chi-square with n-1 degrees of freedom; the
	// 0.1 % critical value of 39 is 72.05. Every one of the 40 must pass
	// (a 4 % chance that one of them fails by luck is the test's flakiness
	// at 0.1 % each; the seeds are fixed, so it fails the same way again).
	expected := float64(runs) / n
	for i, row := range counts {
		var chi float64
		for _, c := range row {
			chi += (float64(c) - expected) * (float64(c) - expected) / expected
		}
		if chi > 72.05 {
			t.Errorf("arrival %d: chi-square of its places %.1f over 39 degrees of freedom (p < 0.001): not uniform", i, chi)
		}
	}
	// Spearman's rho of independent orders has mean 0 and variance
	// 1/(n-1); its mean over runs, 1/sqrt((n-1)·runs).
	if mean, se := rhoSum/runs, 1/math.Sqrt(float64((n-1)*runs)); math.Abs(mean) > 4*se {
		t.Errorf("mean Spearman rho between arrival and place %.4f, more than 4 standard errors (%.4f) from 0", mean, se)
	}
}

// TestPlaceOfPermutation: for every pre-queue size, under several seeds,
// PlaceOf gives the tickets 1..n the places 1..n, one each; a ticket
// outside the pre-queue keeps its number.
func TestPlaceOfPermutation(t *testing.T) {
	sizes := []int64{65_537} // 2¹⁶ + 1: the most cycle-walking (a domain of 2¹⁸)
	for n := int64(1); n <= 300; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		for s := range 3 {
			if n > 300 && s > 0 {
				break
			}
			seed := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "seed %d of %d", s, n))
			taken := make([]bool, n+1)
			for ticket := int64(1); ticket <= n; ticket++ {
				p := shuffle.PlaceOf(seed, n, ticket)
				if p < 1 || p > n || taken[p] {
					t.Fatalf("pre-queue of %d, seed %d: ticket %d gets place %d, outside 1..%d or taken", n, s, ticket, p, n)
				}
				taken[p] = true
			}
			if p := shuffle.PlaceOf(seed, n, n+1); p != n+1 {
				t.Errorf("ticket %d after a pre-queue of %d: place %d", n+1, n, p)
			}
		}
	}
}

// BenchmarkPlaceOf measures one place of a pre-queue of 600,000 (the
// million scenario's opening at 36 s): docs/benchmarks.md, "The poll in
// process".
func BenchmarkPlaceOf(b *testing.B) {
	seed := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 256))
	const n = 600_000
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += shuffle.PlaceOf(seed, n, int64(i%n)+1)
	}
	if sink == 0 {
		b.Fatal("no place computed")
	}
}
