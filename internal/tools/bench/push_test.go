package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestPushCost: the sender's lines of the bill, by hand: nothing without
// subscribed people, and with them its Lambda minutes, a write per push
// sent and the index's per person, and a query a minute.
func TestPushCost(t *testing.T) {
	base := Result{Mode: "simulate", Requests: 20, Enters: 10, Polls: 10, Admitted: 10, PeakRps: 15, DurationSeconds: 150}
	pushed := base
	pushed.PushShare, pushed.Subscribed, pushed.PushesReady, pushed.PushesTurn, pushed.SenderMinutes = new(1.0), 10, 8, 10, 3
	type lines struct {
		Usage                          [4]float64 // minutes, GB-s, WRU, RRU
		Lambda, Writes, Reads, NotPush float64
	}
	for _, tc := range []struct {
		name   string
		prices func(*Prices)
		r      Result
		want   lines
	}{
		{"share 0", nil, base, lines{}},
		{"share 0, reported", nil, Result{Mode: "simulate", Requests: 20, Enters: 10, Polls: 10, Admitted: 10, PeakRps: 15, DurationSeconds: 150, PushShare: new(0.0)}, lines{}},
		{"share 1, defaults", nil, pushed, lines{
			Usage:  [4]float64{3, 3 * 60 * 0.25, (8+2*10)*1 + 10*2, 10 * 9.0 / 80},
			Lambda: 3*0.2e-6 + 3*60*0.25*0.0000133334, Writes: 48 * 0.625e-6, Reads: 10 * 9.0 / 80 * 0.125e-6,
		}},
		{"share 1, flags", func(p *Prices) {
			p.SenderMsPerMinute, p.SenderMemoryMB, p.PushWRU, p.PushIndexWRU, p.PushListRRU = 6000, 256, 2, 1, 5
		}, pushed, lines{
			Usage:  [4]float64{3, 3 * 6 * 0.25, (8+2*10)*2 + 10*1, 50},
			Lambda: 3*0.2e-6 + 3*6*0.25*0.0000133334, Writes: 66 * 0.625e-6, Reads: 50 * 0.125e-6,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPrices()
			if tc.prices != nil {
				tc.prices(&p)
			}
			c := p.Cost(tc.r)
			notPush := p.Cost(base)
			got := lines{[4]float64{float64(c.Usage.SenderMinutes), c.Usage.SenderGBSeconds, c.Usage.PushWRU, c.Usage.PushRRU},
				c.PushLambda, c.PushDynamoWrite, c.PushDynamoRead, c.Total - notPush.Total}
			want := tc.want
			want.NotPush = want.Lambda + want.Writes + want.Reads
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-9, 1e-15)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPushRows: the push lines show when push was modelled, even at share
// 0, and not otherwise; the bill gets the sender's own lines.
func TestPushRows(t *testing.T) {
	pushLabels := []string{"push share (subscribed)", "subscribed people", "pushes sent: get ready", "pushes sent: your turn (each a poll)",
		"push sender minutes (someone subscribed waits)", "push sender Lambda GB-seconds", "push DynamoDB write units (claims, index)",
		"push DynamoDB read units (sender query)", "cost: push sender Lambda", "cost: push DynamoDB writes", "cost: push DynamoDB reads"}
	for _, tc := range []struct {
		name  string
		share *float64
		want  []string // the push labels present
	}{
		{"not modelled", nil, nil},
		{"share 0", new(0.0), pushLabels},
		{"share 0.5", new(0.5), pushLabels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Policy: "eta", Mode: "simulate", Users: 10, Admitted: 10, Requests: 20, Enters: 10, Polls: 10, PushShare: tc.share}
			if tc.share != nil {
				r.Subscribed, r.PushesReady, r.PushesTurn, r.SenderMinutes = 5, 5, 5, 1
			}
			r.Finish(10 * time.Second)
			r.Price(DefaultPrices())
			var got []string
			for _, c := range r.cells() {
				if slices.Contains(pushLabels, c.label) {
					got = append(got, c.label)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("push lines (-want +got):\n%s", diff)
			}
		})
	}
}
