package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// Finding is a place whose records disagree with each other.
type Finding struct {
	Place   int64
	Token   string // "" when no token holds the place
	Problem string
}

// CapReport is the audit of a program's admissions against its cap or no-show handling.
type CapReport struct {
	Cap           int64 // 0: no cap (no-show handling only)
	NoShowSeconds int64
	// Peak is the most people active at once (from AdmittedAt to the session's end or AdmissionExpiresAt),
	// first at PeakAtMs; a lower bound when Unplaced admitted tokens have no known place.
	Peak           int
	PeakAtMs       int64
	PeakLowerBound bool
	Unplaced       int
	// EndedBySite are places in their group's ended records; LeftByHolder
	// admitted tokens with leftAt whose place is not; NoShows places sealed
	// and not sighted. ProgramEnded and ProgramNoShows are the folds' totals.
	EndedBySite, LeftByHolder, NoShows int64
	ProgramEnded, ProgramNoShows       int64
	SightedUnrecorded                  int       // sighted places whose token has no admittedAt
	Findings                           []Finding // the records that contradict each other, by place
}

// OverCap reports whether more people were active at once than the cap.
func (c CapReport) OverCap() bool { return c.Cap > 0 && int64(c.Peak) > c.Cap }

// Undercounted reports whether a program total exceeds what the records show.
func (c CapReport) Undercounted() bool {
	return c.EndedBySite < c.ProgramEnded || c.NoShows < c.ProgramNoShows
}

// OK reports whether the cap held, the totals are possible and the records agree.
func (c CapReport) OK() bool { return !c.OverCap() && !c.Undercounted() && len(c.Findings) == 0 }

// auditCapacity audits p's admissions against its groups; seeded: p's seed verified, its places are known.
func auditCapacity(p Program, tokens []queue.Token, seeded bool) *CapReport {
	c := &CapReport{Cap: p.MaxActiveUsers, NoShowSeconds: p.NoShowSeconds, ProgramEnded: p.Capacity.Ended, ProgramNoShows: p.Capacity.NoShows}
	qp := p.Program
	if !seeded {
		qp.ShuffleSeed = "" // a pre-queue's places are unknown
	}
	group := func(place int64) capacity.Group { return p.Groups[capacity.GroupOf(place)] }
	held := map[int64][]queue.Token{}
	var active []event
	for _, t := range tokens {
		if t.ProgramID != p.ID {
			continue
		}
		place, placed := qp.Place(t.Ticket)
		if placed {
			held[place] = append(held[place], t)
		}
		admitted, left, end := pace.UnixMs(t.AdmittedAt), pace.UnixMs(t.LeftAt), pace.UnixMs(t.AdmissionExpiresAt)
		if admitted == 0 {
			continue
		}
		if end == 0 {
			end = admitted + qp.Window().Milliseconds()
		}
		_, ended := group(place).Ended[place]
		switch {
		case !placed:
			c.Unplaced++
			if left != 0 {
				end = min(end, left)
			}
		case ended && left != 0:
			end = min(end, left)
		case left != 0:
			c.LeftByHolder++
		}
		if placed && !slices.Contains(group(place).Sighted, place) {
			c.add(place, t.ID, "admitted (admittedAt) but not sighted: the folds would count its slot free")
		}
		if end > admitted {
			active = append(active, event{admitted, 1}, event{end, -1})
		}
	}
	c.PeakLowerBound = c.Unplaced > 0
	c.groups(p.Groups, held)
	c.Peak, c.PeakAtMs = peakOf(active)
	slices.SortStableFunc(c.Findings, func(a, b Finding) int { return cmp.Compare(a.Place, b.Place) })
	return c
}

// groups checks what the groups recorded, by place, against the tokens that hold each place.
func (c *CapReport) groups(groups map[int64]capacity.Group, held map[int64][]queue.Token) {
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		grp := groups[g]
		for _, place := range grp.Sighted {
			if ts := held[place]; len(ts) > 0 && ts[0].AdmittedAt.IsZero() {
				c.SightedUnrecorded++
			}
		}
		for _, place := range slices.Sorted(maps.Keys(grp.Ended)) {
			c.EndedBySite++
			ts := held[place]
			switch {
			case !slices.Contains(grp.Sighted, place):
				c.add(place, "", "ended by the site but never sighted")
			case len(ts) == 0:
			case ts[0].AdmittedAt.IsZero() || ts[0].LeftAt.IsZero():
				c.add(place, ts[0].ID, "ended by the site, but its token lacks admittedAt or leftAt")
			}
		}
		for place := g*capacity.GroupSize + 1; place <= min(grp.SealedThrough, (g+1)*capacity.GroupSize); place++ {
			if slices.Contains(grp.Sighted, place) {
				continue
			}
			c.NoShows++
			if ts := held[place]; len(ts) > 0 && (!ts[0].AdmittedAt.IsZero() || ts[0].AdmissionPass != "") {
				c.add(place, ts[0].ID, "a no-show (sealed, not sighted) whose token was admitted or holds a pass")
			}
		}
	}
}

// event is the start (delta 1) or end (-1) of someone's activity, in Unix ms.
type event struct{ at, delta int64 }

// peakOf is the most people active at once (ends first at an instant), and the first instant they are.
func peakOf(events []event) (peak int, atMs int64) {
	slices.SortFunc(events, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	n := 0
	for _, e := range events {
		n += int(e.delta)
		if n > peak {
			peak, atMs = n, e.at
		}
	}
	return peak, atMs
}

func (c *CapReport) add(place int64, token, problem string) {
	c.Findings = append(c.Findings, Finding{Place: place, Token: token, Problem: problem})
}

// write prints c, listing at most limit findings (all when limit <= 0).
func (c CapReport) write(w io.Writer, limit int) {
	if c.Cap > 0 {
		fmt.Fprintf(w, "  active      at most %d at once", c.Peak)
		if c.Peak > 0 {
			fmt.Fprintf(w, " (from %s)", pace.FromUnixMs(c.PeakAtMs).UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintf(w, either(c.OverCap(), ": ABOVE the cap of %d", ", within the cap of %d"), c.Cap)
		if c.PeakLowerBound {
			fmt.Fprintf(w, " (a lower bound: %d admitted tokens have no known place; give -shuffle-seed)", c.Unplaced)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  ended       by the site %d (program's total %d), by their holder %d (slot held until the window ends)\n", c.EndedBySite, c.ProgramEnded, c.LeftByHolder)
	fmt.Fprintf(w, "  no-shows    %d sealed and not sighted (program's total %d)\n", c.NoShows, c.ProgramNoShows)
	switch {
	case c.Undercounted():
		fmt.Fprintln(w, "  totals      the program counted more than its records show: a fold counted an end or a no-show that did not happen")
	case c.EndedBySite != c.ProgramEnded || c.NoShows != c.ProgramNoShows:
		fmt.Fprintln(w, "  totals      the program's totals are behind its records: folds count ends and no-shows a moment after they are recorded (not a failure)")
	}
	if c.SightedUnrecorded > 0 {
		fmt.Fprintf(w, "  sighted     %d places whose token has no admittedAt (a failed pass signing or a leave racing the first poll; the slot is held until expiry)\n", c.SightedUnrecorded)
	}
	writeList(w, c.Findings, limit, "inconsistent places", func(f Finding) {
		fmt.Fprintf(w, "  inconsistent place %d", f.Place)
		if f.Token != "" {
			fmt.Fprintf(w, " (token %s)", f.Token)
		}
		fmt.Fprintf(w, ": %s\n", f.Problem)
	})
}
