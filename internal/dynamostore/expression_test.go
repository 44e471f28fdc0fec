package dynamostore

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// TestConditionsFlat: the conditions of the hot writes (a ticket, a token's
// state) are flat conjunctions, at most three parentheses deep (an OR's
// operand calling a function), as all writes them; a chain of .And would
// nest one level per term, which dynalite parses in exponential time.
func TestConditionsFlat(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	conds := map[string]expression.ConditionBuilder{"waiting": waiting()}
	for _, n := range []int64{1, 8} {
		for i, step := range issueSteps(now, n, 1e6) {
			conds[fmt.Sprintf("issue step %d of %d tickets", i, n)] = step.cond
		}
	}
	for name, c := range conds {
		expr, _, err := build(c, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		depth, deepest := 0, 0
		for _, r := range *expr.Condition() {
			switch r {
			case '(':
				depth++
				deepest = max(deepest, depth)
			case ')':
				depth--
			}
		}
		if deepest > 3 {
			t.Errorf("%s: parentheses %d deep, want at most 3: %s", name, deepest, *expr.Condition())
		}
	}
}
