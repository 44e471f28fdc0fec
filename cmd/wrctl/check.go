package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/bench"
)

// The limits check assumes unless told: the template's and AWS's (docs/operations.md, "The pre-sale check").
const (
	defaultCacheTTL = config.DefaultProgramCacheTTL // PROGRAM_CACHE_TTL, the template's ProgramCacheTTL
	defaultAPIRate  = 1000                          // the template's ThrottlingRateLimit
	// DynamoDB on demand: the writes a second of a new (not pre-warmed) table, a table's quota, an item's.
	newTableWrites   = 4000
	tableWritesQuota = 40000
	itemWriteUnits   = tickets.DefaultItemWriteUnits
	shortNoShow      = 2 * time.Minute       // the least noShowSeconds a background tab (a timer a minute) keeps
	browserHash      = 700 * time.Nanosecond // a laptop Chromium's SHA-256 of the proof of work (docs/benchmarks.md)
	textsBudget      = 4 << 10               // the size of a program's texts past which check warns
)

// checkLoad is the load the operator announces, and the deployment's limits the API does not tell.
type checkLoad struct {
	expect   int64         // people expected in all
	peak     float64       // most enters in one second; 0: the crowd over a minute
	cacheTTL time.Duration // the deployment's PROGRAM_CACHE_TTL
	apiRate  float64       // the API's ThrottlingRateLimit, requests a second
}

// peakRate is the peak of enters a second: as given, or the crowd over a minute.
func (l checkLoad) peakRate() float64 {
	if l.peak > 0 {
		return l.peak
	}
	return float64(l.expect) / 60
}

// level is a check's verdict.
type level string

const (
	levelOK   level = "OK"
	levelWarn level = "WARN"
	levelFail level = "FAIL"
)

// finding is one line of check: a verdict, the check's name, what was found, and what to do.
type finding struct {
	Level level  `json:"level"`
	Check string `json:"check"`
	Says  string `json:"says"`
	Do    string `json:"do,omitempty"`
}

func (a *app) checkCommand(fs *flag.FlagSet) runner {
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
		found, n := checks(p.Program, l, now), map[level]int{}
		var rows [][]string
		for _, f := range found {
			n[f.Level]++
			rows = append(rows, []string{string(f.Level), f.Check, f.Says})
			if f.Do != "" {
				rows = append(rows, []string{"", "", "→ " + f.Do})
			}
		}
		if c.json { // a finding a line
			for _, f := range found {
				if err = writeJSON(a.stdout, f); err != nil {
					break
				}
			}
		} else {
			fmt.Fprintf(a.stdout, "check %s at %s for %s people, %s enters/s at the peak\n",
				p.ProgramID, clock(now), bench.Thousands(l.expect), rate(l.peakRate()))
			if err = writeTable(a.stdout, 0, rows); err == nil {
				_, err = fmt.Fprintf(a.stdout, "%d FAIL, %d WARN, %d OK\n", n[levelFail], n[levelWarn], n[levelOK])
			}
		}
		if err == nil && n[levelFail] > 0 {
			err = fmt.Errorf("check failed: %d of %d lines FAIL", n[levelFail], len(found))
		}
		return err
	}
}

// presale is one program's pre-sale check; each method is a check of docs/operations.md's checklist.
type presale struct {
	p     api.Program
	q     admission.Program // p as the service's rules read it
	l     checkLoad
	now   time.Time
	delay time.Duration // how long after it is made a change takes effect
	out   []finding
}

// checks runs every check of p at now for the load l, in the checklist's order.
func checks(p api.Program, l checkLoad, now time.Time) []finding {
	c := &presale{p: p, q: domain(p), l: l, now: now, delay: queue.ChangeDelay(l.cacheTTL)}
	for _, check := range []func(){c.entries, c.opening, c.closing, c.target, c.enters, c.challenge, c.table, c.requests, c.capacity, c.line, c.wait, c.page} {
		check()
	}
	return c.out
}

// domain is p as the service's rules read it.
func domain(p api.Program) admission.Program {
	return admission.Program{ID: p.ProgramID, Options: settings.Options{AdmissionWindow: time.Duration(p.AdmissionWindowSeconds) * time.Second,
		Closed: p.Closed, OpensAt: p.OpensAt.Time, ClosesAt: p.ClosesAt.Time, MaxActiveUsers: p.MaxActiveUsers, NoShowSeconds: p.NoShowSeconds}}
}

// add adds a finding; do is "" for nothing to do.
func (c *presale) add(l level, check, says, do string) {
	c.out = append(c.out, finding{Level: l, Check: check, Says: says, Do: do})
}

// slotHeld is how long someone who came holds a capped slot unless the site ends their
// session: until the folds count it free, then a fold and a change delay.
func (c *presale) slotHeld() time.Duration {
	return c.q.SlotFreedAfter() + capacity.FoldPeriod + c.delay
}

func (c *presale) entries() {
	if c.p.Closed {
		c.add(levelFail, "entries", "closed: every enter gets 409 PROGRAM_CLOSED", "wrctl reopen "+c.p.ProgramID)
	} else {
		c.add(levelOK, "entries", "open: enters are taken", "")
	}
}

func (c *presale) opening() {
	p, id, delay := c.p, c.p.ProgramID, c.delay
	at, left := p.OpensAt.Time, p.OpensAt.Sub(c.now)
	switch {
	case at.IsZero() && p.Paused:
		c.add(levelOK, "opening", "no opensAt, paused: nobody is admitted until you resume", "wrctl resume "+id+" when the sale opens")
	case at.IsZero():
		c.add(levelOK, "opening", "no opensAt, not paused: admitting now", "")
	case left <= 0:
		c.add(levelWarn, "opening", fmt.Sprintf("opensAt %s has passed (%s ago): admission started then, and the opening can no longer change", clock(at), span(-left)),
			"check that this is the sale you mean; a new sale needs a new program id")
	case left <= delay:
		c.add(levelFail, "opening", fmt.Sprintf("opens in %s, within the change delay (%s): the opening can no longer move, and a change made now takes effect after it", span(left), delay),
			"to fix anything below before anyone is admitted: wrctl pause "+id)
	case left <= delay+time.Minute:
		c.add(levelWarn, "opening", fmt.Sprintf("opens in %s: every change must be made before %s (the opening less the change delay, %s)", span(left), clock(at.Add(-delay)), delay),
			"fix what this check finds now, or move the opening: wrctl put "+id+" -opens-at …")
	default:
		c.add(levelOK, "opening", fmt.Sprintf("opens at %s, in %s; changes until %s", clock(at), span(left), clock(at.Add(-delay))), "")
	}
	if p.Paused && left > 0 { // an opening ahead
		c.add(levelWarn, "opening", "paused: nobody is admitted at the opening until you resume", "wrctl resume "+id+" (it takes effect "+delay.String()+" later)")
	}
}

func (c *presale) closing() {
	at, id := c.p.ClosesAt.Time, c.p.ProgramID
	start := c.now.Add(max(c.p.OpensAt.Sub(c.now), 0)) // of admission
	switch {
	case at.IsZero():
		c.add(levelOK, "closing", "no scheduled close", "")
	case c.q.ClosedAt(c.now):
		c.add(levelFail, "closing", "closed to new entries at "+clock(at), "the close can no longer move: make a new program for a new sale")
	case at.Before(start.Add(secondsOf(float64(c.l.expect) / max(c.l.peakRate(), 1e-9)))):
		c.add(levelWarn, "closing", fmt.Sprintf("closes at %s, before %d people at %s enters/s can have entered", clock(at), c.l.expect, rate(c.l.peakRate())),
			"wrctl put "+id+" -closes-at … (later), while it is more than "+span(c.delay)+" ahead")
	default:
		c.add(levelOK, "closing", "closes to new entries at "+clock(at), "")
	}
}

func (c *presale) target() {
	u, id := c.p.TargetURL, c.p.ProgramID
	switch {
	case u == "":
		c.add(levelFail, "targetUrl", "none: admitted people get a pass and nowhere to go", "wrctl put "+id+" -target-url https://…")
	case strings.HasPrefix(u, "http://"):
		c.add(levelWarn, "targetUrl", u+" is plain http, which only a loopback host may be: a rehearsal's setting", "wrctl put "+id+" -target-url https://…")
	default:
		c.add(levelOK, "targetUrl", u, "")
	}
}

// enters: tickets come from the program item up to a rate, then from ticket shards, up to a ceiling.
func (c *presale) enters() {
	peak := c.l.peakRate()
	shardsFrom, most := tickets.EnterRates(itemWriteUnits)
	switch {
	case peak > most:
		c.add(levelFail, "enters", fmt.Sprintf("%s enters/s at the peak, past the %s/s one program's ticket shards take", rate(peak), rate(most)),
			"split the crowd into programs (one per entry page or region)")
	case peak > shardsFrom:
		c.add(levelOK, "enters", fmt.Sprintf("%s enters/s at the peak: on ticket shards (from %s/s, on DynamoDB; up to %s/s)", rate(peak), rate(shardsFrom), rate(most)), "")
	default:
		c.add(levelOK, "enters", fmt.Sprintf("%s enters/s at the peak: on the program item (shards from %s/s)", rate(peak), rate(shardsFrom)), "")
	}
}

func (c *presale) challenge() {
	bits := c.p.ChallengeBits
	wait := time.Duration(1<<bits) * browserHash
	wait = wait.Round(either(wait < time.Second, time.Millisecond, 100*time.Millisecond))
	says := fmt.Sprintf("%d bits: a person's browser works about %v to enter (a laptop's Chromium; phones a few times longer); without JavaScript nobody can", bits, wait)
	switch {
	case bits == 0:
		c.add(levelOK, "challenge", "no proof of work on enter", "")
	case bits > 22:
		c.add(levelWarn, "challenge", says, "wrctl put "+c.p.ProgramID+" -challenge-bits 18 (20 against a known bot problem)")
	default:
		c.add(levelOK, "challenge", says, "")
	}
}

// table: an enter writes the token, the ticket and its idempotency claim; an admission's
// first poll the token, and its sighting when followed.
func (c *presale) table() {
	perAdmission := either(c.q.Followed(), 2.0, 1.0)
	r := c.p.AdmissionRatePerSecond
	writes := 3*c.l.peakRate() + perAdmission*r
	says := fmt.Sprintf("about %s write units/s at the peak (3 an enter, %g an admission), this program alone", rate(writes), perAdmission)
	switch {
	case writes > tableWritesQuota:
		c.add(levelFail, "table", says+fmt.Sprintf(": past the table's default quota of %s/s", rate(tableWritesQuota)),
			"ask for a higher per-table quota (Service Quotas, DynamoDB) and pre-warm the table (WarmThroughput)")
	case writes > newTableWrites:
		c.add(levelWarn, "table", says+fmt.Sprintf(": past the %s/s a new on-demand table takes before it has seen more", rate(newTableWrites)),
			"pre-warm the table before the sale (UpdateTable with WarmThroughput)")
	default:
		c.add(levelOK, "table", says, "")
	}
	if c.q.Followed() && r > itemWriteUnits {
		c.add(levelWarn, "table", fmt.Sprintf("%s admissions/s: the sightings of %d consecutive places go to one item, past the %s writes/s an item takes", rate(r), capacity.GroupSize, rate(itemWriteUnits)),
			"admit at most "+rate(itemWriteUnits)+"/s with a cap or no-show handling")
	}
}

// requests: the API's throttle against the enters at the peak, no-show handling's polls,
// and a shuffled opening's pre-queue, which polls within 1-5 s of the opening.
func (c *presale) requests() {
	reqs, why := c.l.peakRate(), "enters at the peak"
	if burst := float64(c.l.expect) / 5; c.p.ShuffleAtOpen && burst > reqs {
		reqs, why = burst, "the shuffled pre-queue's polls after the opening"
	}
	if c.q.Followed() {
		every := c.q.PollToShow(c.l.cacheTTL, 0).Seconds() // the most often: at the door
		reqs += float64(c.l.expect) / every
		why += fmt.Sprintf(", plus everyone waiting polling every %gs for no-show handling", every)
	}
	says := fmt.Sprintf("up to %s requests/s (%s)", rate(reqs), why)
	if reqs > c.l.apiRate {
		c.add(levelFail, "requests", says+fmt.Sprintf(", past the API's throttle of %s/s: the rest get 429 and retry later", rate(c.l.apiRate)),
			"raise ThrottlingRateLimit and ThrottlingBurstLimit (and Lambda concurrency) before the sale, or give -api-rate your stack's")
	} else {
		c.add(levelOK, "requests", says+fmt.Sprintf(", under the API's throttle of %s/s", rate(c.l.apiRate)), "")
	}
}

// capacity: a cap that never fills or holds admission below the rate, a no-show time too long or too short.
func (c *presale) capacity() {
	if !c.q.Followed() {
		c.add(levelOK, "capacity", "no cap, no no-show handling: the rate alone paces admission (either can be set only before admission starts)", "")
	}
	if c.p.MaxActiveUsers > 0 {
		c.capped()
	}
	if c.p.NoShowSeconds > 0 {
		c.noShows()
	}
}

func (c *presale) capped() {
	m, r, id, window := c.p.MaxActiveUsers, c.p.AdmissionRatePerSecond, c.p.ProgramID, c.q.Window()
	held := c.slotHeld()
	switch turnover := float64(m) / held.Seconds(); {
	case r <= 0:
		c.add(levelOK, "capacity", fmt.Sprintf("cap %s: manual admissions wait for a free slot", bench.Thousands(m)), "")
	case r < turnover:
		c.add(levelWarn, "capacity", fmt.Sprintf("cap %s is never reached: at %s/s it takes %s to fill, and the first admitted are done after %s (the window, its minute of margin, a fold and a change delay); it costs polls and writes for nothing",
			bench.Thousands(m), rate(r), span(secondsOf(float64(m)/r)), span(held)),
			"if the site holds fewer at once, lower it before admission starts: wrctl put "+id+" -max-active N")
	default:
		c.add(levelOK, "capacity", fmt.Sprintf("cap %s fills in %s; then admission follows the slots freed: about %s/s as windows of %s end, more as the site ends sessions (DELETE /api/v1/admin/programs/%s/session)",
			bench.Thousands(m), span(secondsOf(float64(m)/r)), rate(turnover), span(window), id), "")
	}
	if c.p.NoShowSeconds == 0 {
		c.add(levelWarn, "capacity", fmt.Sprintf("no noShowSeconds: someone admitted who never comes holds a slot for the whole window (%s)", span(window)),
			"wrctl put "+id+" -no-show 3m (before admission starts)")
	}
}

func (c *presale) noShows() {
	s, id, came := c.q.NoShowAfter(), c.p.ProgramID, c.q.SlotFreedAfter()
	switch {
	case s > came:
		c.add(levelWarn, "capacity", fmt.Sprintf("noShowSeconds %s is longer than the window and its margin (%s): a no-show holds a slot longer than someone who came", span(s), span(came)),
			"wrctl put "+id+" -no-show N, N under the window")
	case s < shortNoShow:
		c.add(levelWarn, "capacity", fmt.Sprintf("noShowSeconds %s: browsers slow a background tab's timers to about once a minute, so people who wait in another tab may be found no-shows", span(s)),
			"wrctl put "+id+" -no-show "+span(shortNoShow)+" or more (before admission starts)")
	default:
		c.add(levelOK, "capacity", fmt.Sprintf("noShowSeconds %s: everyone waiting polls at least every %s near the door", span(s), span(c.q.PollToShow(c.l.cacheTTL, 0))), "")
	}
}

func (c *presale) line() {
	mw, e, id := c.p.MaxWaiting, c.l.expect, c.p.ProgramID
	switch {
	case mw == 0:
		c.add(levelOK, "line", "no maxWaiting: the line takes everyone", "")
	case e > mw:
		c.add(levelWarn, "line", fmt.Sprintf("maxWaiting %s is below the %s expected: about %s get 409 QUEUE_FULL if they come before admission makes room", bench.Thousands(mw), bench.Thousands(e), bench.Thousands(e-mw)),
			"unless the limit is what is on sale: wrctl put "+id+" -max-waiting "+strconv.FormatInt(e, 10)+" (0: no limit)")
	default:
		c.add(levelOK, "line", fmt.Sprintf("maxWaiting %s holds the %s expected (a burst may pass it by a cache lifetime of enters)", bench.Thousands(mw), bench.Thousands(e)), "")
	}
}

// wait: the last in line's wait at the pace kept, against how long a waiting token is kept.
func (c *presale) wait() {
	r, e, id, keep := c.p.AdmissionRatePerSecond, c.l.expect, c.p.ProgramID, queue.WaitingTokenRetention
	if m := c.p.MaxActiveUsers; m > 0 { // a full cap paces admission by the slots turning over
		r = min(r, float64(m)/c.slotHeld().Seconds())
	}
	if r <= 0 {
		c.add(levelOK, "wait", "manual admission: the wait is what you admit", "")
		return
	}
	last := secondsOf(float64(e) / r)
	says := fmt.Sprintf("the last of %s waits about %s at %s/s", bench.Thousands(e), span(last), rate(r))
	says += either(r < c.p.AdmissionRatePerSecond, " (the cap's pace, without sessions ended early)", "")
	early := max(c.p.OpensAt.Sub(c.now), 0) // from now to the opening, for those who enter now
	switch {
	case last > keep:
		c.add(levelFail, "wait", says+fmt.Sprintf(", past the %s a waiting token is kept: the last lose their place", span(keep)),
			"raise the rate (wrctl put "+id+" -rate N) or split the crowd into programs")
	case early+last > keep:
		c.add(levelWarn, "wait", says+fmt.Sprintf(", and who enters now waits %s more for the opening: past the %s a waiting token is kept", span(early), span(keep)),
			"let people in no earlier than "+span(keep-last)+" before the opening")
	default:
		c.add(levelOK, "wait", says+fmt.Sprintf(", inside the %s a waiting token is kept", span(keep)), "")
	}
}

func (c *presale) page() {
	p, id, n := c.p, c.p.ProgramID, len(c.out)
	if p.DisplayName == "" {
		c.add(levelWarn, "page", "no displayName: the waiting-room page's title is the program id", "wrctl put "+id+" -display-name …")
	}
	if p.Notice != "" {
		c.add(levelWarn, "page", fmt.Sprintf("notice %q: everyone waiting sees it", p.Notice), "if it is stale: wrctl put "+id+" -notice \"\"")
	}
	// A ticket from the program item writes the whole item, texts included: a write unit a kilobyte.
	if b, _ := json.Marshal(p.Profile); len(b) > textsBudget {
		c.add(levelWarn, "page", fmt.Sprintf("the texts weigh %d KB: every ticket from the program item writes them, about %d write units each", len(b)>>10, (len(b)+1023)>>10),
			"shorten the message or the translations, or expect ticket shards sooner")
	}
	if len(c.out) == n {
		c.add(levelOK, "page", fmt.Sprintf("displayName %q, no notice", p.DisplayName), "")
	}
}

// secondsOf is s seconds as a duration.
func secondsOf(s float64) time.Duration {
	if s >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// rate formats a number a second: a whole or big one with thousands separators, else to a tenth (a thousandth below 1).
func rate(f float64) string {
	if f >= 100 || f == math.Trunc(f) {
		return bench.Thousands(int64(math.Round(f)))
	}
	unit := either(f >= 1, 10.0, 1000.0)
	return strconv.FormatFloat(math.Round(f*unit)/unit, 'f', -1, 64)
}

// clock formats an instant, in UTC to the second.
func clock(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// span formats a duration as roundDuration does, without its zero units: 48h, 2h30m, 4m5s, 45s.
func span(d time.Duration) string { return zeroUnits.ReplaceAllString(roundDuration(d).String(), "$1") }

// zeroUnits are the zero minutes and seconds after an hour or a minute: 2h0m0s, 4m0s.
var zeroUnits = regexp.MustCompile(`([hm])0(m0)?s$`)
