package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/config"
)

// checkNow is the instant the table tests check at.
var checkNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// ready is a program ready for a small sale: open, admitting 10 a second,
// a target, a name, no cap.
func ready() api.Program {
	return api.Program{ProgramID: "gala", AdmissionRatePerSecond: 10, AdmissionWindowSeconds: 600,
		CreatedAt: api.TimeOf(checkNow.Add(-time.Hour)),
		Profile:   api.Profile{DisplayName: "Gala", TargetURL: "https://tickets.example/gala"}}
}

// small is the load the table tests announce unless a case says otherwise.
var small = checkLoad{expect: 1000, peak: 50, cacheTTL: time.Second, apiRate: defaultAPIRate}

// verdicts returns the findings of the check named, as "LEVEL: says".
func verdicts(fs []finding, check string) []string {
	var out []string
	for _, f := range fs {
		if f.Check == check {
			out = append(out, string(f.Level)+": "+f.Says)
		}
	}
	return out
}

type checkCase struct {
	name string
	edit func(p *api.Program, l *checkLoad)
	// want is, for each line of the check, its level and a regular
	// expression its text must match.
	want []string
}

// runChecks runs each case's program and load through the check named.
func runChecks(t *testing.T, check string, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, l := ready(), small
			if tc.edit != nil {
				tc.edit(&p, &l)
			}
			got := verdicts(checks(p, l, checkNow), check)
			if len(got) != len(tc.want) {
				t.Fatalf("%s lines:\n%s\nwant %d like %q", check, strings.Join(got, "\n"), len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				lvl, re, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(got[i], lvl+": ") || !regexp.MustCompile(re).MatchString(got[i]) {
					t.Errorf("line %d: %q, want %s matching %q", i, got[i], lvl, re)
				}
			}
		})
	}
}

func at(d time.Duration) api.Time { return api.TimeOf(checkNow.Add(d)) }

// TestChecks runs each check's cases, by the name its lines carry.
func TestChecks(t *testing.T) {
	t.Parallel()
	peak := func(n float64) func(*api.Program, *checkLoad) {
		return func(_ *api.Program, l *checkLoad) { l.peak = n }
	}
	crowd := func(e int64, r float64) func(*api.Program, *checkLoad) {
		return func(p *api.Program, l *checkLoad) { l.expect, p.AdmissionRatePerSecond = e, r }
	}
	for _, tc := range []struct {
		check string
		cases []checkCase
	}{
		{"entries", []checkCase{
			{"open", nil, []string{"OK: open"}},
			{"closed", func(p *api.Program, _ *checkLoad) { p.Closed = true }, []string{"FAIL: 409 PROGRAM_CLOSED"}},
		}},
		{"opening", []checkCase{
			{"none, admitting", nil, []string{"OK: admitting now"}},
			{"none, paused", func(p *api.Program, _ *checkLoad) { p.Paused = true }, []string{"OK: until you resume"}},
			{"passed", func(p *api.Program, _ *checkLoad) { p.OpensAt = at(-5 * time.Minute) }, []string{"WARN: has passed \\(5m ago\\)"}},
			{"within the change delay", func(p *api.Program, _ *checkLoad) { p.OpensAt = at(1500 * time.Millisecond) },
				[]string{"FAIL: within the change delay \\(2s\\)"}},
			{"within a longer cache's delay", func(p *api.Program, l *checkLoad) { p.OpensAt = at(5 * time.Second); l.cacheTTL = 5 * time.Second },
				[]string{"FAIL: within the change delay \\(6s\\)"}},
			{"no cache, no delay", func(p *api.Program, l *checkLoad) { p.OpensAt = at(time.Second); l.cacheTTL = 0 },
				[]string{"WARN: before 2026-12-01T10:00:01Z"}},
			{"in a minute", func(p *api.Program, _ *checkLoad) { p.OpensAt = at(time.Minute) }, []string{"WARN: every change must be made before 2026-12-01T10:00:58Z"}},
			{"in an hour", func(p *api.Program, _ *checkLoad) { p.OpensAt = at(time.Hour) }, []string{"OK: in 1h; changes until 2026-12-01T10:59:58Z"}},
			{"in an hour, paused", func(p *api.Program, _ *checkLoad) { p.OpensAt, p.Paused = at(time.Hour), true },
				[]string{"OK: in 1h", "WARN: paused: nobody is admitted at the opening"}},
		}},
		{"closing", []checkCase{
			{"none", nil, []string{"OK: no scheduled close"}},
			{"passed", func(p *api.Program, _ *checkLoad) { p.ClosesAt = at(-time.Minute) }, []string{"FAIL: closed to new entries at 2026-12-01T09:59:00Z"}},
			// 1,000 people at 50 a second take 20 s to enter.
			{"before the crowd is in", func(p *api.Program, _ *checkLoad) { p.ClosesAt = at(10 * time.Second) }, []string{"WARN: before 1000 people at 50 enters/s"}},
			{"after an opening and the crowd", func(p *api.Program, _ *checkLoad) {
				p.OpensAt, p.ClosesAt = at(time.Hour), at(time.Hour+30*time.Second)
			},
				[]string{"OK: closes to new entries at 2026-12-01T11:00:30Z"}},
			{"before the crowd after an opening", func(p *api.Program, _ *checkLoad) {
				p.OpensAt, p.ClosesAt = at(time.Hour), at(time.Hour+10*time.Second)
			},
				[]string{"WARN: closes at 2026-12-01T11:00:10Z"}},
		}},
		{"challenge", []checkCase{
			{"none", nil, []string{"OK: no proof of work"}},
			{"18 bits", func(p *api.Program, _ *checkLoad) { p.ChallengeBits = 18 }, []string{"OK: 18 bits: a person's browser works about 184ms"}},
			{"24 bits", func(p *api.Program, _ *checkLoad) { p.ChallengeBits = 24 }, []string{"WARN: 24 bits: a person's browser works about 11.7s"}},
		}},
		{"targetUrl", []checkCase{
			{"https", nil, []string{"OK: https://tickets.example/gala"}},
			{"none", func(p *api.Program, _ *checkLoad) { p.TargetURL = "" }, []string{"FAIL: nowhere to go"}},
			{"http", func(p *api.Program, _ *checkLoad) { p.TargetURL = "http://127.0.0.1:8080/" }, []string{"WARN: plain http"}},
		}},
		{"enters", []checkCase{
			{"on the program item", peak(200), []string{"OK: 200 enters/s at the peak: on the program item"}},
			{"on shards", peak(201), []string{"OK: on ticket shards"}},
			{"past the shards", peak(70001), []string{"FAIL: past the 70,000/s"}},
			{"the crowd over a minute", func(_ *api.Program, l *checkLoad) { l.expect, l.peak = 6_000_000, 0 }, []string{"FAIL: 100,000 enters/s"}},
		}},
		{"table", []checkCase{
			{"small", nil, []string{"OK: about 160 write units/s"}},
			{"past a new table", func(_ *api.Program, l *checkLoad) { l.peak = 1400 }, []string{"WARN: about 4,210 .* new on-demand table"}},
			{"an admission followed writes twice", func(p *api.Program, l *checkLoad) { l.peak, p.NoShowSeconds = 1330, 180 },
				[]string{"WARN: about 4,010 .*2 an admission"}},
			{"past the quota", func(_ *api.Program, l *checkLoad) { l.peak = 14000 }, []string{"FAIL: past the table's default quota"}},
			{"sightings past an item's writes", func(p *api.Program, _ *checkLoad) { p.AdmissionRatePerSecond, p.MaxActiveUsers = 1001, 1_000_000 },
				[]string{"OK: about 2,152", "WARN: the sightings of 128 consecutive places go to one item"}},
			{"an item's writes, no cap", func(p *api.Program, _ *checkLoad) { p.AdmissionRatePerSecond = 1001 }, []string{"OK: about 1,151"}},
		}},
		{"requests", []checkCase{
			{"under", func(_ *api.Program, l *checkLoad) { l.peak = 1000 }, []string{"OK: up to 1,000 requests/s"}},
			{"over", func(_ *api.Program, l *checkLoad) { l.peak = 1001 }, []string{"FAIL: past the API's throttle of 1,000/s"}},
			{"over, a raised throttle", func(_ *api.Program, l *checkLoad) { l.peak, l.apiRate = 1001, 5000 }, []string{"OK: under the API's throttle of 5,000/s"}},
			{"a shuffled opening", func(p *api.Program, l *checkLoad) { p.ShuffleAtOpen, l.expect = true, 10000 },
				[]string{"FAIL: up to 2,000 requests/s \\(the shuffled pre-queue"}},
			{"no-show polls", func(p *api.Program, l *checkLoad) { p.NoShowSeconds, l.expect, l.peak = 30, 16000, 1 },
				[]string{"FAIL: up to 1,001 requests/s .*every 16s"}},
		}},
		{"capacity", []checkCase{
			{"none", nil, []string{"OK: no cap, no no-show handling"}},
			{"never reached", func(p *api.Program, _ *checkLoad) { p.MaxActiveUsers, p.NoShowSeconds = 100_000, 180 },
				[]string{"WARN: cap 100,000 is never reached: at 10/s it takes 2h47m to fill, and the first admitted are done after 11m2s", "OK: noShowSeconds 3m"}},
			{"fills", func(p *api.Program, _ *checkLoad) { p.MaxActiveUsers, p.NoShowSeconds = 5000, 180 },
				[]string{"OK: cap 5,000 fills in 8m20s; then .* about 7.6/s as windows of 10m end", "OK: noShowSeconds 3m: everyone waiting polls at least every 1m31s"}},
			{"no no-show time", func(p *api.Program, _ *checkLoad) { p.MaxActiveUsers = 5000 },
				[]string{"OK: cap 5,000", "WARN: no noShowSeconds: .* the whole window \\(10m\\)"}},
			{"no-show past the window", func(p *api.Program, _ *checkLoad) { p.NoShowSeconds, p.AdmissionWindowSeconds = 3600, 600 },
				[]string{"WARN: longer than the window and its margin \\(11m\\)"}},
			{"a short no-show", func(p *api.Program, _ *checkLoad) { p.NoShowSeconds = 30 }, []string{"WARN: noShowSeconds 30s: .*background tab"}},
			{"manual, capped", func(p *api.Program, _ *checkLoad) {
				p.AdmissionRatePerSecond, p.MaxActiveUsers, p.NoShowSeconds = 0, 50, 180
			},
				[]string{"OK: cap 50: manual admissions wait", "OK: noShowSeconds 3m"}},
		}},
		{"line", []checkCase{
			{"no limit", nil, []string{"OK: no maxWaiting"}},
			{"below the crowd", func(p *api.Program, _ *checkLoad) { p.MaxWaiting = 400 }, []string{"WARN: maxWaiting 400 is below the 1,000 expected: about 600 get 409 QUEUE_FULL"}},
			{"holds the crowd", func(p *api.Program, _ *checkLoad) { p.MaxWaiting = 1000 }, []string{"OK: maxWaiting 1,000 holds"}},
		}},
		{"wait", []checkCase{
			{"short", nil, []string{"OK: the last of 1,000 waits about 1m40s at 10/s, inside the 48h"}},
			{"past the tokens' life", crowd(200_000, 1), []string{"FAIL: waits about 55h33m at 1/s, past the 48h"}},
			{"at the cap's pace", func(p *api.Program, l *checkLoad) { l.expect, p.MaxActiveUsers, p.NoShowSeconds = 200_000, 600, 180 },
				[]string{"FAIL: at 0.906/s \\(the cap's pace"}},
			{"entered long before the opening", func(p *api.Program, l *checkLoad) { l.expect, p.OpensAt = 200_000, at(47*time.Hour) },
				[]string{"WARN: waits 47h more for the opening"}},
			{"manual", crowd(1000, 0), []string{"OK: manual admission"}},
		}},
		{"page", []checkCase{
			{"named, no notice", nil, []string{`OK: displayName "Gala", no notice`}},
			{"unnamed, a notice", func(p *api.Program, _ *checkLoad) { p.DisplayName, p.Notice = "", "Sold out" },
				[]string{"WARN: title is the program id", `WARN: notice "Sold out"`}},
			{"texts past 4 KB", func(p *api.Program, _ *checkLoad) {
				p.Translations = map[string]api.Texts{}
				for _, lang := range []string{"ko", "ja", "zh", "fr", "de"} {
					p.Translations[lang] = api.Texts{Message: strings.Repeat("가", 300)} // 900 bytes each
				}
			}, []string{"WARN: the texts weigh 4 KB: every ticket from the program item writes them, about 5 write units each"}},
		}},
	} {
		t.Run(tc.check, func(t *testing.T) {
			t.Parallel()
			runChecks(t, tc.check, tc.cases)
		})
	}
}

// TestCheckOrder: the checks run in the checklist's order, which
// docs/operations.md lists under the same names.
func TestCheckOrder(t *testing.T) {
	t.Parallel()
	var got []string
	for _, f := range checks(ready(), small, checkNow) {
		if len(got) == 0 || got[len(got)-1] != f.Check {
			got = append(got, f.Check)
		}
	}
	want := []string{"entries", "opening", "closing", "targetUrl", "enters", "challenge", "table", "requests", "capacity", "line", "wait", "page"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
}

// TestCheckDefaults: the deployment check assumes by default is the
// template's (the program cache's TTL).
func TestCheckDefaults(t *testing.T) {
	t.Parallel()
	if defaultCacheTTL != config.DefaultProgramCacheTTL {
		t.Errorf("-cache-ttl defaults to %v, the service to %v", defaultCacheTTL, config.DefaultProgramCacheTTL)
	}
}

// TestCheckCommand runs check against the API in process: a program ready
// for the sale passes, with one line per check; without a target it
// fails with status 1; -json prints one finding per line; a missing
// -expect is a usage error.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
	if r := wrctl(t, env, "put", "gala", "-rate", "10", "-display-name", "Gala", "-target-url", "https://tickets.example/gala"); r.status != 0 {
		t.Fatalf("put: exit %d: %s", r.status, r.stderr)
	}
	r := wrctl(t, env, "check", "gala", "-expect", "1000", "-peak", "50")
	if r.status != 0 || !strings.HasPrefix(r.stdout, "check gala at ") || !strings.HasSuffix(r.stdout, "0 FAIL, 0 WARN, 12 OK\n") {
		t.Errorf("ready: exit %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^OK +targetUrl +https://tickets.example/gala$`).MatchString(r.stdout) {
		t.Errorf("no OK targetUrl line:\n%s", r.stdout)
	}

	if r := wrctl(t, env, "put", "gala", "-target-url", ""); r.status != 0 {
		t.Fatalf("put: exit %d: %s", r.status, r.stderr)
	}
	r = wrctl(t, env, "check", "gala", "-expect", "1000", "-json")
	var fails []string
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var f finding
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("-json line %q: %v", line, err)
		}
		if f.Level == levelFail {
			fails = append(fails, fmt.Sprintf("%s: %s", f.Check, f.Do))
		}
	}
	if r.status != 1 || !strings.Contains(r.stderr, "check failed: 1 of 12 lines FAIL") {
		t.Errorf("no target: exit %d, stderr %q; want 1 and the tally", r.status, r.stderr)
	}
	if want := []string{"targetUrl: wrctl put gala -target-url https://…"}; !cmp.Equal(fails, want) {
		t.Errorf("FAIL lines %q, want %q", fails, want)
	}

	if r := wrctl(t, env, "check", "gala"); r.status != 2 || !strings.Contains(r.stderr, "-expect must be at least 1") {
		t.Errorf("no -expect: exit %d, stderr %q; want a usage error", r.status, r.stderr)
	}
	if r := wrctl(t, env, "check", "nosuch", "-expect", "10"); r.status != 1 || !strings.Contains(r.stderr, "PROGRAM_NOT_FOUND") {
		t.Errorf("no program: exit %d, stderr %q", r.status, r.stderr)
	}
}
