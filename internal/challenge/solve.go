package challenge

import (
	"context"
	"crypto/sha256"
	"fmt"
)

// alphabet is the characters of a solution, in the order Solve counts.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// checkEvery is how many candidates Solve tries between two looks at ctx.
const checkEvery = 1 << 14

// Solve finds a solution of challenge with bits zero bits on one core, and
// the hashes it took.
func Solve(ctx context.Context, challenge string, bits int) (string, int64, error) {
	if bits < 0 || bits > MaxBits {
		return "", 0, fmt.Errorf("challenge: %d bits out of 0..%d", bits, MaxBits)
	}
	buf := make([]byte, 0, len(challenge)+1+MaxSolutionLen)
	buf = append(buf, challenge...)
	buf = append(buf, '.')
	prefix := len(buf)
	digits := []int{0} // the candidate's digits, least significant first
	for tries := int64(1); ; tries++ {
		buf = buf[:prefix]
		for _, d := range digits {
			buf = append(buf, alphabet[d])
		}
		sum := sha256.Sum256(buf)
		if leadingZeros(sum[:]) >= bits {
			return string(buf[prefix:]), tries, nil
		}
		if tries%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return "", tries, fmt.Errorf("challenge: solve: %w", err)
			}
		}
		next(&digits)
	}
}

// next counts digits up by one in base len(alphabet).
func next(digits *[]int) {
	d := *digits
	for i := range d {
		if d[i]++; d[i] < len(alphabet) {
			return
		}
		d[i] = 0
	}
	*digits = append(d, 0)
}
