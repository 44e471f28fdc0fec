package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// The deployment's limits that check assumes unless told: the template's
// defaults, and AWS's (docs/operations.md, "The pre-sale check").
const (
	defaultCacheTTL = time.Second // PROGRAM_CACHE_TTL, the template's ProgramCacheTTL
	defaultAPIRate  = 1000        // the template's ThrottlingRateLimit
	// DynamoDB on demand: what a new table writes a second until it has
	// seen more (or is pre-warmed), and the per-table quota.
	newTableWrites   = 4000
	tableWritesQuota = 40000
	// itemWriteUnits is what one DynamoDB item (partition) writes a second.
	itemWriteUnits = tickets.DefaultItemWriteUnits
	// shortNoShow is the least noShowSeconds that a page in a background
	// tab keeps: browsers slow its timers to about once a minute.
	shortNoShow = 2 * time.Minute
)

// checkLoad is the load the operator announces, and the deployment's
// limits that the admin API does not tell.
type checkLoad struct {
	expect   int64         // people expected in all
	peak     float64       // most enters in one second; 0: the crowd over a minute
	cacheTTL time.Duration // the deployment's PROGRAM_CACHE_TTL
	apiRate  float64       // the API's ThrottlingRateLimit, requests a second
}

// level is a check's verdict.
type level string

const (
	levelOK   level = "OK"
	levelWarn level = "WARN"
	levelFail level = "FAIL"
)

// finding is one line of check: a verdict, the check's name, what was
// found and why it matters, and what to do about it. Its JSON form is
// check's -json output, one object per line.
type finding struct {
	Level level  `json:"level"`
	Check string `json:"check"`
	Says  string `json:"says"`
	Do    string `json:"do,omitempty"`
}

func found(l level, check, says, do string) []finding {
	return []finding{{Level: l, Check: check, Says: says, Do: do}}
}

// errCheckFailed is check's error when a check FAILs; its findings are
// printed.
var errCheckFailed = errors.New("check failed")

func (a *app) checkCommand(fs *flag.FlagSet) func(context.Context, *call) error {
	var l checkLoad
	fs.Int64Var(&l.expect, "expect", 0, "the `people` expected in all (required)")
	fs.Float64Var(&l.peak, "peak", 0, "the most enters in one second, at the opening (default: -expect over a minute)")
	fs.DurationVar(&l.cacheTTL, "cache-ttl", defaultCacheTTL, "the deployment's PROGRAM_CACHE_TTL (ProgramCacheTTL)")
	fs.Float64Var(&l.apiRate, "api-rate", defaultAPIRate, "the API's ThrottlingRateLimit, requests a second")
	return func(ctx context.Context, c *call) error {
		if l.expect < 1 || l.peak < 0 || l.cacheTTL < 0 || l.apiRate <= 0 {
			return a.usageError("check", "-expect must be at least 1, -peak and -cache-ttl at least 0, -api-rate above 0")
		}
		p, err := c.client.GetProgram(ctx, c.args[0])
		if err != nil {
			return err
		}
		now := a.clock.Now()
		found := presale{p: p.Program, l: l, now: now}.checks()
		if err := a.printFindings(c, p.ProgramID, l, now, found); err != nil {
			return err
		}
		if n := count(found, levelFail); n > 0 {
			return fmt.Errorf("%w: %d of %d lines FAIL", errCheckFailed, n, len(found))
		}
		return nil
	}
}

func count(fs []finding, l level) int {
	n := 0
	for _, f := range fs {
		if f.Level == l {
			n++
		}
	}
	return n
}

// printFindings prints fs: one JSON object per line with -json, else a
// title, one line per finding with what to do under it, and the tally.
func (a *app) printFindings(c *call, id string, l checkLoad, now time.Time, fs []finding) error {
	if c.json {
		enc := json.NewEncoder(a.stdout)
		for _, f := range fs {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(a.stdout, "check %s at %s for %s people, %s enters/s at the peak\n",
		id, now.UTC().Format(time.RFC3339), thousands(l.expect), rate(l.peakRate()))
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Level, f.Check, f.Says)
		if f.Do != "" {
			fmt.Fprintf(tw, "\t\t→ %s\n", f.Do)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%d FAIL, %d WARN, %d OK\n", count(fs, levelFail), count(fs, levelWarn), count(fs, levelOK))
	return err
}

// peakRate is the peak of enters a second: as given, or the crowd over a
// minute.
func (l checkLoad) peakRate() float64 {
	if l.peak > 0 {
		return l.peak
	}
	return float64(l.expect) / 60
}

// changeDelay is how long after it is made an admin change takes effect
// (docs/design.md, "Segments and scheduled changes").
func (l checkLoad) changeDelay() time.Duration {
	if l.cacheTTL <= 0 {
		return 0
	}
	return l.cacheTTL + queue.AdminWriteBudget
}
