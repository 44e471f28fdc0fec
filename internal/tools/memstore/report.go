package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
)

var _ queue.ReportStore = (*Store)(nil)

// reportRecords are the programs' minute tallies and kept reports.
type reportRecords struct {
	minutes map[minuteKey]*minute
	reports map[string]kept
}

// kept is a kept report as JSON, as dynamostore keeps it.
type kept struct {
	data   []byte
	madeAt time.Time
}

type minuteKey struct {
	program string
	minute  int64 // Unix minutes
}

// minute is a stored minute and the flushes added into it.
type minute struct {
	m       report.Minute
	flushes map[string]struct{}
}

// AddMinute implements report.Sink.
func (s *Store) AddMinute(ctx context.Context, programID, flush string, m report.Minute) error {
	return s.do(ctx, func() error {
		at := m.At.UTC().Truncate(time.Minute)
		k := minuteKey{programID, at.Unix() / 60}
		cur := s.rep.minutes[k]
		if cur == nil {
			cur = &minute{m: report.Minute{At: at}, flushes: map[string]struct{}{}}
			s.rep.minutes[k] = cur
		}
		if _, done := cur.flushes[flush]; !done {
			cur.flushes[flush] = struct{}{}
			cur.m.Add(m)
		}
		return nil
	})
}

// Minutes implements queue.ReportStore.
func (s *Store) Minutes(ctx context.Context, programID string) ([]report.Minute, error) {
	return locked(ctx, s, func() ([]report.Minute, error) {
		var out []report.Minute
		for k, m := range s.rep.minutes {
			if k.program == programID {
				out = append(out, m.m)
			}
		}
		slices.SortFunc(out, func(a, b report.Minute) int { return a.At.Compare(b.At) })
		return out, nil
	})
}

// PutReport implements queue.ReportStore, keeping r as JSON.
func (s *Store) PutReport(ctx context.Context, r report.Report) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.do(ctx, func() error {
		s.rep.reports[r.ProgramID] = kept{data, r.MadeAt}
		return nil
	})
}

// GetReport implements queue.ReportStore.
func (s *Store) GetReport(ctx context.Context, programID string) (report.Report, error) {
	k, err := locked(ctx, s, func() (kept, error) { return lookup(s.rep.reports, programID) })
	var r report.Report
	if err == nil {
		err = json.Unmarshal(k.data, &r)
	}
	return r, err
}

// EachToken implements queue.ReportStore, calling each outside the lock;
// read is every record the store holds, as a scan of a table would read.
func (s *Store) EachToken(ctx context.Context, programID string, each func(queue.Token)) (int64, error) {
	var toks []queue.Token
	read, err := locked(ctx, s, func() (int64, error) {
		for _, t := range s.tokens {
			if t.ProgramID == programID {
				toks = append(toks, t)
			}
		}
		n := len(s.programs) + len(s.tokens) + len(s.shards) + len(s.challenges) + len(s.handoffs) + len(s.rep.minutes) + len(s.rep.reports)
		for _, h := range s.cat.history {
			n += len(h)
		}
		return int64(n), nil
	})
	slices.SortFunc(toks, func(a, b queue.Token) int { return cmp.Or(cmp.Compare(a.Ticket, b.Ticket), cmp.Compare(a.ID, b.ID)) })
	for _, t := range toks {
		if err = cmp.Or(err, ctx.Err()); err != nil {
			break
		}
		each(t)
	}
	return read, err
}

// sweepReports drops the minutes and reports kept history.Retention; s.mu is held.
func (s *Store) sweepReports(now time.Time) {
	maps.DeleteFunc(s.rep.minutes, func(_ minuteKey, m *minute) bool { return now.After(m.m.At.Add(history.Retention)) })
	maps.DeleteFunc(s.rep.reports, func(_ string, k kept) bool { return now.After(k.madeAt.Add(history.Retention)) })
}
