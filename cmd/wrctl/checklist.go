package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// presale is one program's pre-sale check: the program as read at now,
// and the announced load. Each method is one check of the checklist in
// docs/operations.md, in its order.
type presale struct {
	p   api.Program
	l   checkLoad
	now time.Time
}

// checks runs every check, in the checklist's order.
func (c presale) checks() []finding {
	var out []finding
	for _, check := range []func() []finding{c.entries, c.opening, c.closing, c.target, c.enters, c.challenge, c.table, c.requests, c.capacity, c.line, c.wait, c.page} {
		out = append(out, check()...)
	}
	return out
}

// window is the program's admission window.
func (c presale) window() time.Duration {
	if w := time.Duration(c.p.AdmissionWindowSeconds) * time.Second; w > 0 {
		return w
	}
	return queue.DefaultAdmissionWindow
}

// followed reports whether the folds follow the program's admissions.
func (c presale) followed() bool { return c.p.MaxActiveUsers > 0 || c.p.NoShowSeconds > 0 }

// slotHeld is how long someone who came holds a capped slot unless the
// site ends their session: the window, the verifiers' margin, then a
// fold and a change delay until the slot is given again.
func (c presale) slotHeld() time.Duration {
	return c.window() + queue.WindowMargin + queue.FoldPeriod + c.l.changeDelay()
}

// paced is the admission rate the program keeps: its rate, or under a cap
// filled, the slots that turn over a second when no session ends early.
func (c presale) paced() float64 {
	r := c.p.AdmissionRatePerSecond
	if m := c.p.MaxActiveUsers; m > 0 {
		r = min(r, float64(m)/c.slotHeld().Seconds())
	}
	return r
}

func (c presale) entries() []finding {
	if c.p.Closed {
		return found(levelFail, "entries", "closed: every enter gets 409 PROGRAM_CLOSED", "wrctl reopen "+c.p.ProgramID)
	}
	return found(levelOK, "entries", "open: enters are taken", "")
}

func (c presale) opening() []finding {
	p, id, delay := c.p, c.p.ProgramID, c.l.changeDelay()
	at := p.OpensAt.Time
	switch {
	case at.IsZero() && p.Paused:
		return found(levelOK, "opening", "no opensAt, paused: nobody is admitted until you resume", "wrctl resume "+id+" when the sale opens")
	case at.IsZero():
		return found(levelOK, "opening", "no opensAt, not paused: admitting now", "")
	case !at.After(c.now):
		return found(levelWarn, "opening", fmt.Sprintf("opensAt %s has passed (%s ago): admission started then, and the opening can no longer change", clock(at), span(c.now.Sub(at))),
			"check that this is the sale you mean; a new sale needs a new program id")
	}
	left := at.Sub(c.now)
	var out []finding
	switch {
	case left <= delay:
		out = found(levelFail, "opening", fmt.Sprintf("opens in %s, within the change delay (%s): the opening can no longer move, and a change made now takes effect after it", span(left), delay),
			"to fix anything below before anyone is admitted: wrctl pause "+id)
	case left <= delay+time.Minute:
		out = found(levelWarn, "opening", fmt.Sprintf("opens in %s: every change must be made before %s (the opening less the change delay, %s)", span(left), clock(at.Add(-delay)), delay),
			"fix what this check finds now, or move the opening: wrctl put "+id+" -opens-at …")
	default:
		out = found(levelOK, "opening", fmt.Sprintf("opens at %s, in %s; changes until %s", clock(at), span(left), clock(at.Add(-delay))), "")
	}
	if p.Paused {
		out = append(out, found(levelWarn, "opening", "paused: nobody is admitted at the opening until you resume", "wrctl resume "+id+" (it takes effect "+delay.String()+" later)")...)
	}
	return out
}

// closing: a scheduled close already passed, or before the announced
// crowd can have entered at the peak rate.
func (c presale) closing() []finding {
	at, id := c.p.ClosesAt.Time, c.p.ProgramID
	switch {
	case at.IsZero():
		return found(levelOK, "closing", "no scheduled close", "")
	case !at.After(c.now):
		return found(levelFail, "closing", "closed to new entries at "+at.UTC().Format(time.RFC3339), "the close can no longer move: make a new program for a new sale")
	}
	start := c.now
	if c.p.OpensAt.After(start) {
		start = c.p.OpensAt.Time
	}
	if arrive := secondsOf(float64(c.l.expect) / max(c.l.peakRate(), 1e-9)); at.Before(start.Add(arrive)) {
		return found(levelWarn, "closing", fmt.Sprintf("closes at %s, before %d people at %s enters/s can have entered", at.UTC().Format(time.RFC3339), c.l.expect, rate(c.l.peakRate())),
			"wrctl put "+id+" -closes-at … (later), while it is more than "+span(c.l.changeDelay())+" ahead")
	}
	return found(levelOK, "closing", "closes to new entries at "+at.UTC().Format(time.RFC3339), "")
}

func (c presale) target() []finding {
	u, id := c.p.TargetURL, c.p.ProgramID
	switch {
	case u == "":
		return found(levelFail, "targetUrl", "none: admitted people get a pass and nowhere to go", "wrctl put "+id+" -target-url https://…")
	case strings.HasPrefix(u, "http://"):
		return found(levelWarn, "targetUrl", u+" is plain http, which only a loopback host may be: a rehearsal's setting", "wrctl put "+id+" -target-url https://…")
	}
	return found(levelOK, "targetUrl", u, "")
}

// enters: a program's tickets come from its item up to a rate, then from
// ticket shards, up to a ceiling.
func (c presale) enters() []finding {
	peak := c.l.peakRate()
	shardsFrom, most := tickets.EnterRates(itemWriteUnits)
	switch {
	case peak > most:
		return found(levelFail, "enters", fmt.Sprintf("%s enters/s at the peak, past the %s/s one program's ticket shards take", rate(peak), rate(most)),
			"split the crowd into programs (one per entry page or region)")
	case peak > shardsFrom:
		return found(levelOK, "enters", fmt.Sprintf("%s enters/s at the peak: on ticket shards (from %s/s, on DynamoDB; up to %s/s)", rate(peak), rate(shardsFrom), rate(most)), "")
	}
	return found(levelOK, "enters", fmt.Sprintf("%s enters/s at the peak: on the program item (shards from %s/s)", rate(peak), rate(shardsFrom)), "")
}

// browserHash is the page's time per SHA-256 of the proof of work in a
// laptop's Chromium (docs/benchmarks.md, "Proof of work").
const browserHash = 700 * time.Nanosecond

// challenge: a proof of work on enter, and what it costs a person.
func (c presale) challenge() []finding {
	bits := c.p.ChallengeBits
	if bits == 0 {
		return found(levelOK, "challenge", "no proof of work on enter", "")
	}
	wait := time.Duration(1<<bits) * browserHash
	if wait < time.Second {
		wait = wait.Round(time.Millisecond)
	} else {
		wait = wait.Round(100 * time.Millisecond)
	}
	says := fmt.Sprintf("%d bits: a person's browser works about %v to enter (a laptop's Chromium; phones a few times longer); without JavaScript nobody can", bits, wait)
	if bits > 22 {
		return found(levelWarn, "challenge", says, "wrctl put "+c.p.ProgramID+" -challenge-bits 18 (20 against a known bot problem)")
	}
	return found(levelOK, "challenge", says, "")
}

// table: an enter writes the token, the ticket and its idempotency claim;
// an admission's first poll the token, and its sighting when followed.
func (c presale) table() []finding {
	perAdmission := 1.0
	if c.followed() {
		perAdmission = 2
	}
	r := c.p.AdmissionRatePerSecond
	writes := 3*c.l.peakRate() + perAdmission*r
	says := fmt.Sprintf("about %s write units/s at the peak (3 an enter, %g an admission), this program alone", rate(writes), perAdmission)
	var out []finding
	switch {
	case writes > tableWritesQuota:
		out = found(levelFail, "table", says+fmt.Sprintf(": past the table's default quota of %s/s", rate(tableWritesQuota)),
			"ask for a higher per-table quota (Service Quotas, DynamoDB) and pre-warm the table (WarmThroughput)")
	case writes > newTableWrites:
		out = found(levelWarn, "table", says+fmt.Sprintf(": past the %s/s a new on-demand table takes before it has seen more", rate(newTableWrites)),
			"pre-warm the table before the sale (UpdateTable with WarmThroughput)")
	default:
		out = found(levelOK, "table", says, "")
	}
	if c.followed() && r > itemWriteUnits {
		out = append(out, found(levelWarn, "table", fmt.Sprintf("%s admissions/s: the sightings of %d consecutive places go to one item, past the %s writes/s an item takes", rate(r), queue.GroupSize, rate(itemWriteUnits)),
			"admit at most "+rate(itemWriteUnits)+"/s with a cap or no-show handling")...)
	}
	return out
}

// requests: the API's throttle against the enters at the peak, the polls
// that no-show handling asks of everyone waiting, and a shuffled
// opening's pre-queue, which polls within 1-5 s of the opening.
func (c presale) requests() []finding {
	reqs, why := c.l.peakRate(), "enters at the peak"
	if c.p.ShuffleAtOpen {
		if burst := float64(c.l.expect) / 5; burst > reqs {
			reqs, why = burst, "the shuffled pre-queue's polls after the opening"
		}
	}
	if s := c.p.NoShowSeconds; s > 0 || c.p.MaxActiveUsers > 0 {
		every := (c.noShow()/2 + time.Second).Seconds()
		reqs += float64(c.l.expect) / every
		why += fmt.Sprintf(", plus everyone waiting polling every %gs for no-show handling", every)
	}
	says := fmt.Sprintf("up to %s requests/s (%s)", rate(reqs), why)
	if reqs > c.l.apiRate {
		return found(levelFail, "requests", says+fmt.Sprintf(", past the API's throttle of %s/s: the rest get 429 and retry later", rate(c.l.apiRate)),
			"raise ThrottlingRateLimit and ThrottlingBurstLimit (and Lambda concurrency) before the sale, or give -api-rate your stack's")
	}
	return found(levelOK, "requests", says+fmt.Sprintf(", under the API's throttle of %s/s", rate(c.l.apiRate)), "")
}

// noShow is how long an admitted person has to fetch their pass: the
// noShowSeconds, or with a cap and none, the window.
func (c presale) noShow() time.Duration {
	if s := c.p.NoShowSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return c.window()
}

// capacity: a cap that never fills, one that holds admission below the
// rate, a no-show that holds a slot longer than someone who came, and a
// no-show time that a background tab cannot keep.
func (c presale) capacity() []finding {
	p := c.p
	if p.MaxActiveUsers == 0 && p.NoShowSeconds == 0 {
		return found(levelOK, "capacity", "no cap, no no-show handling: the rate alone paces admission (either can be set only before admission starts)", "")
	}
	var out []finding
	if p.MaxActiveUsers > 0 {
		out = c.capped()
	}
	if p.NoShowSeconds > 0 {
		out = append(out, c.noShows()...)
	}
	return out
}

func (c presale) capped() []finding {
	m, r, id := c.p.MaxActiveUsers, c.p.AdmissionRatePerSecond, c.p.ProgramID
	held := c.slotHeld()
	var out []finding
	switch turnover := float64(m) / held.Seconds(); {
	case r <= 0:
		out = found(levelOK, "capacity", fmt.Sprintf("cap %s: manual admissions wait for a free slot", thousands(m)), "")
	case r < turnover:
		out = found(levelWarn, "capacity", fmt.Sprintf("cap %s is never reached: at %s/s it takes %s to fill, and the first admitted are done after %s (the window, its minute of margin, a fold and a change delay); it costs polls and writes for nothing",
			thousands(m), rate(r), span(secondsOf(float64(m)/r)), span(held)),
			"if the site holds fewer at once, lower it before admission starts: wrctl put "+id+" -max-active N")
	default:
		out = found(levelOK, "capacity", fmt.Sprintf("cap %s fills in %s; then admission follows the slots freed: about %s/s as windows of %s end, more as the site ends sessions (DELETE /api/v1/admin/programs/%s/session)",
			thousands(m), span(secondsOf(float64(m)/r)), rate(turnover), span(c.window()), id), "")
	}
	if c.p.NoShowSeconds == 0 {
		out = append(out, found(levelWarn, "capacity", fmt.Sprintf("no noShowSeconds: someone admitted who never comes holds a slot for the whole window (%s)", span(c.window())),
			"wrctl put "+id+" -no-show 3m (before admission starts)")...)
	}
	return out
}

func (c presale) noShows() []finding {
	s, id := c.noShow(), c.p.ProgramID
	switch {
	case s > c.window()+queue.WindowMargin:
		return found(levelWarn, "capacity", fmt.Sprintf("noShowSeconds %s is longer than the window and its margin (%s): a no-show holds a slot longer than someone who came", span(s), span(c.window()+queue.WindowMargin)),
			"wrctl put "+id+" -no-show N, N under the window")
	case s < shortNoShow:
		return found(levelWarn, "capacity", fmt.Sprintf("noShowSeconds %s: browsers slow a background tab's timers to about once a minute, so people who wait in another tab may be found no-shows", span(s)),
			"wrctl put "+id+" -no-show "+span(shortNoShow)+" or more (before admission starts)")
	}
	return found(levelOK, "capacity", fmt.Sprintf("noShowSeconds %s: everyone waiting polls at least every %s", span(s), span(s/2+time.Second)), "")
}

func (c presale) line() []finding {
	mw, e, id := c.p.MaxWaiting, c.l.expect, c.p.ProgramID
	switch {
	case mw == 0:
		return found(levelOK, "line", "no maxWaiting: the line takes everyone", "")
	case e > mw:
		return found(levelWarn, "line", fmt.Sprintf("maxWaiting %s is below the %s expected: about %s get 409 QUEUE_FULL if they come before admission makes room", thousands(mw), thousands(e), thousands(e-mw)),
			"unless the limit is what is on sale: wrctl put "+id+" -max-waiting "+strconv.FormatInt(e, 10)+" (0: no limit)")
	}
	return found(levelOK, "line", fmt.Sprintf("maxWaiting %s holds the %s expected (a burst may pass it by a cache lifetime of enters)", thousands(mw), thousands(e)), "")
}

// wait: the last in line's wait at the pace admission keeps, against how
// long a waiting token is kept after its enter.
func (c presale) wait() []finding {
	r, e, id := c.paced(), c.l.expect, c.p.ProgramID
	if r <= 0 {
		return found(levelOK, "wait", "manual admission: the wait is what you admit", "")
	}
	keep := queue.WaitingTokenRetention
	last := secondsOf(float64(e) / r)
	says := fmt.Sprintf("the last of %s waits about %s at %s/s", thousands(e), span(last), rate(r))
	if r < c.p.AdmissionRatePerSecond {
		says += " (the cap's pace, without sessions ended early)"
	}
	var early time.Duration // from now to the opening, for those who enter now
	if at := c.p.OpensAt.Time; at.After(c.now) {
		early = at.Sub(c.now)
	}
	switch {
	case last > keep:
		return found(levelFail, "wait", says+fmt.Sprintf(", past the %s a waiting token is kept: the last lose their place", span(keep)),
			"raise the rate (wrctl put "+id+" -rate N) or split the crowd into programs")
	case early+last > keep:
		return found(levelWarn, "wait", says+fmt.Sprintf(", and who enters now waits %s more for the opening: past the %s a waiting token is kept", span(early), span(keep)),
			"let people in no earlier than "+span(keep-last)+" before the opening")
	}
	return found(levelOK, "wait", says+fmt.Sprintf(", inside the %s a waiting token is kept", span(keep)), "")
}

func (c presale) page() []finding {
	p, id := c.p, c.p.ProgramID
	var out []finding
	if p.DisplayName == "" {
		out = found(levelWarn, "page", "no displayName: the waiting-room page's title is the program id", "wrctl put "+id+" -display-name …")
	}
	if p.Notice != "" {
		out = append(out, found(levelWarn, "page", fmt.Sprintf("notice %q: everyone waiting sees it", p.Notice), "if it is stale: wrctl put "+id+" -notice \"\"")...)
	}
	// Every ticket taken from the program item writes the whole item, the
	// texts included: a write unit a kilobyte.
	if b, _ := json.Marshal(p.Profile); len(b) > textsBudget {
		out = append(out, found(levelWarn, "page", fmt.Sprintf("the texts weigh %d KB: every ticket from the program item writes them, about %d write units each", len(b)>>10, (len(b)+1023)>>10),
			"shorten the message or the translations, or expect ticket shards sooner")...)
	}
	if out == nil {
		out = found(levelOK, "page", fmt.Sprintf("displayName %q, no notice", p.DisplayName), "")
	}
	return out
}

// textsBudget is the size of a program's texts past which the check warns.
const textsBudget = 4 << 10

// secondsOf is s seconds as a duration.
func secondsOf(s float64) time.Duration {
	if s >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// rate formats a number a second: a whole one with thousands separators,
// a small one to a tenth (a thousandth below 1).
func rate(f float64) string {
	switch {
	case f >= 100 || f == math.Trunc(f):
		return thousands(int64(math.Round(f)))
	case f >= 1:
		return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

// clock formats an instant, in UTC to the second.
func clock(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// span formats a duration to the second (to the minute from an hour),
// without its zero units: 48h, 2h30m, 4m5s, 45s.
func span(d time.Duration) string {
	s := roundDuration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
