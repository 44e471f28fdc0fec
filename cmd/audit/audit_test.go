package main

import (
	"cmp"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shuffle"
	"github.com/example/waitingroom/internal/shufflekey"
)

// program is a program item of id with issued tickets.
func program(id string, issued int64) Program {
	return Program{Program: admission.Program{ID: id, Issued: issued}}
}

// ms is the instant of Unix ms, the zero time for 0.
var ms = pace.FromUnixMs

// tokens returns one token of program p per ticket, named by position.
func tokens(p string, tickets ...int64) []queue.Token {
	var ts []queue.Token
	for i, n := range tickets {
		ts = append(ts, queue.Token{ID: p + "-" + string(rune('a'+i)), ProgramID: p, Ticket: n})
	}
	return ts
}

func TestAudit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		issued     int64
		tickets    []int64
		dups       []Duplicate
		outOfRange []int64
		gaps       []Range
		gapCount   int64
		ok         bool
	}{
		{name: "empty", issued: 0, ok: true},
		{name: "clean", issued: 5, tickets: []int64{3, 1, 5, 2, 4}, ok: true},
		{name: "all gaps", issued: 3, gaps: []Range{{1, 3}}, gapCount: 3, ok: true},
		{
			name: "gaps", issued: 10, tickets: []int64{2, 3, 6, 10},
			gaps: []Range{{1, 1}, {4, 5}, {7, 9}}, gapCount: 6, ok: true,
		},
		{
			name: "duplicates", issued: 4, tickets: []int64{1, 2, 2, 3, 4, 4, 4},
			dups: []Duplicate{{2, []string{"p-b", "p-c"}}, {4, []string{"p-e", "p-f", "p-g"}}},
		},
		{
			name: "out of range", issued: 3, tickets: []int64{0, 1, 4, -2, 3, 99},
			outOfRange: []int64{-2, 0, 4, 99}, gaps: []Range{{2, 2}}, gapCount: 1,
		},
		{
			// Two tokens hold ticket 1 and none holds 2: as many tokens as
			// tickets issued, which a bare count would pass.
			name: "duplicate and gap", issued: 3, tickets: []int64{1, 1, 3},
			dups: []Duplicate{{1, []string{"p-a", "p-b"}}}, gaps: []Range{{2, 2}}, gapCount: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := append(tokens("p", tc.tickets...), tokens("other", 1, 1, 7)...)
			r := Audit(program("p", tc.issued), ts)
			if r.Tokens != len(tc.tickets) || r.Unrecorded != len(tc.tickets) {
				t.Errorf("Tokens %d, Unrecorded %d; want %d", r.Tokens, r.Unrecorded, len(tc.tickets))
			}
			if !reflect.DeepEqual(r.Duplicates, tc.dups) {
				t.Errorf("Duplicates = %v, want %v", r.Duplicates, tc.dups)
			}
			var oor []int64
			for _, tok := range r.OutOfRange {
				oor = append(oor, tok.Ticket)
			}
			if !reflect.DeepEqual(oor, tc.outOfRange) {
				t.Errorf("OutOfRange tickets = %v, want %v", oor, tc.outOfRange)
			}
			if !reflect.DeepEqual(r.Gaps, tc.gaps) || r.GapCount != tc.gapCount {
				t.Errorf("Gaps = %v (%d), want %v (%d)", r.Gaps, r.GapCount, tc.gaps, tc.gapCount)
			}
			if r.OK() != tc.ok {
				t.Errorf("OK() = %v, want %v", r.OK(), tc.ok)
			}
			if r.Balanced() != tc.ok {
				t.Errorf("Balanced() = %v, want %v", r.Balanced(), tc.ok)
			}
		})
	}
}

func TestAuditStatuses(t *testing.T) {
	ts := []queue.Token{
		{ID: "a", ProgramID: "p", Ticket: 1, AdmittedAt: ms(10)},
		{ID: "b", ProgramID: "p", Ticket: 2, LeftAt: ms(11)},
		{ID: "c", ProgramID: "p", Ticket: 3},
		{ID: "d", ProgramID: "p", Ticket: 4, AdmittedAt: ms(12)},
		{ID: "e", ProgramID: "p", Ticket: 5, AdmittedAt: ms(12), LeftAt: ms(20)}, // its admission ended early
	}
	r := Audit(program("p", 5), ts)
	if r.AdmittedSeen != 3 || r.Ended != 1 || r.Left != 1 || r.Unrecorded != 1 || !r.OK() {
		t.Errorf("got admitted seen %d, ended %d, left %d, unrecorded %d, OK %v; want 3, 1, 1, 1, true", r.AdmittedSeen, r.Ended, r.Left, r.Unrecorded, r.OK())
	}
}

func TestGapLimit(t *testing.T) {
	var held []int64 // 1..49 of 50: one gap, 2 %
	for i := int64(1); i <= 49; i++ {
		held = append(held, i)
	}
	for _, tc := range []struct {
		limit float64
		ok    bool
	}{
		{0, true}, // no limit
		{0.01, false},
		{0.019, false}, // just under
		{0.02, true},   // exactly at the limit
		{0.5, true},
	} {
		r := Audit(program("p", 50), tokens("p", held...))
		r.GapLimit = tc.limit
		if r.GapCount != 1 || r.OK() != tc.ok || r.GapsOver() == tc.ok {
			t.Errorf("limit %g: gaps %d, OK %v, GapsOver %v; want OK %v", tc.limit, r.GapCount, r.OK(), r.GapsOver(), tc.ok)
		}
	}
}

func TestAuditAll(t *testing.T) {
	items := Items{
		Programs: map[string]Program{"b": program("b", 2), "a": program("a", 1)},
		Tokens:   append(append(tokens("a", 1), tokens("b", 1, 2)...), tokens("ghost", 1)...),
	}
	rs := AuditAll(items, "")
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.Program)
	}
	if want := []string{"a", "b", "ghost"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("programs %v, want %v", ids, want)
	}
	if !rs[0].OK() || !rs[1].OK() {
		t.Errorf("a or b fails: %+v %+v", rs[0], rs[1])
	}
	// Tokens of a program that has no item: out of range of issued 0.
	if g := rs[2]; !g.Missing || g.OK() || len(g.OutOfRange) != 1 {
		t.Errorf("ghost = %+v, want Missing, one token out of range, not OK", g)
	}
	if rs := AuditAll(items, "b"); len(rs) != 1 || rs[0].Program != "b" || rs[0].Tokens != 2 {
		t.Errorf("AuditAll(b) = %+v", rs)
	}
	if rs := AuditAll(items, "nope"); len(rs) != 0 {
		t.Errorf("AuditAll(nope) = %+v, want none", rs)
	}
}

func TestDecode(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	raw := []map[string]types.AttributeValue{
		{"pk": s("PROGRAM#gala"), "sk": s("PROGRAM"), "programId": s("gala"), "issued": n("3"), "rate": n("2.5"), "paused": &types.AttributeValueMemberBOOL{}},
		{"pk": s("TOKEN#t1"), "sk": s("TOKEN"), "tokenId": s("t1"), "programId": s("gala"), "ticket": n("1"), "admittedAt": n("1700000000000"), "ttl": n("1700000600")},
		{"pk": s("TOKEN#t2"), "sk": s("TOKEN"), "tokenId": s("t2"), "programId": s("gala"), "ticket": n("3"), "issuedAt": n("1700000000001")},
		{"pk": s("TOKEN#t3"), "sk": s("TOKEN"), "tokenId": s("t3"), "programId": s("gala")}, // no ticket
		// A claim: an enter with an Idempotency-Key before its ticket, no place.
		{"pk": s("TOKEN#t4"), "sk": s("TOKEN"), "tokenId": s("t4"), "programId": s("gala"), "claimId": s("c1"), "claimMs": n("1700000000002"), "ttl": n("1700003600")},
		{"pk": s("SOMETHING#else"), "sk": s("X")},
	}
	var items Items
	if err := Decode(raw, &items); err != nil {
		t.Fatal(err)
	}
	if want := map[string]Program{"gala": program("gala", 3)}; !reflect.DeepEqual(items.Programs, want) {
		t.Errorf("Programs = %v, want %v", items.Programs, want)
	}
	want := []queue.Token{
		{ID: "t1", ProgramID: "gala", Ticket: 1, AdmittedAt: ms(1700000000000), ExpiresAt: time.Unix(1700000600, 0).UTC()},
		{ID: "t2", ProgramID: "gala", Ticket: 3, IssuedAt: ms(1700000000001)},
		{ID: "t3", ProgramID: "gala"},
	}
	if !reflect.DeepEqual(items.Tokens, want) || items.Other != 1 || items.Claims != 1 {
		t.Errorf("Tokens = %+v, Other %d, Claims %d; want %+v, 1, 1", items.Tokens, items.Other, items.Claims, want)
	}
	r := Audit(items.Programs["gala"], items.Tokens)
	if r.OK() || len(r.OutOfRange) != 1 || r.GapCount != 1 {
		t.Errorf("audit = %+v: want the ticketless token out of range and ticket 2 a gap", r)
	}
	bad := []map[string]types.AttributeValue{{"pk": s("TOKEN#x"), "sk": s("TOKEN"), "ticket": s("one")}}
	if err := Decode(bad, &items); err == nil {
		t.Error("Decode accepted a string ticket")
	}
}

func TestWrite(t *testing.T) {
	r := Audit(program("p", 9), tokens("p", 1, 1, 3, 8, 12))
	wantLines(t, written(r, 0),
		"program p\n",
		"issued      9\n",
		"tokens      5 (admission seen by a poll 0, of them ended early 0; left 0, neither recorded 5)\n",
		"duplicates  1 tickets (1 extra tokens)\n",
		"out of range 1 tokens (ticket not in 1..9)\n",
		"gaps        6 tickets without a token (66.67 % of issued): 2, 4-7, 9\n",
		"duplicate ticket 1: tokens p-a, p-b\n",
		"out of range: ticket 12, token p-e\n",
		"issued 9 ≠ tokens 5 + gaps 6\n",
		"FAIL\n",
	)
	wantLines(t, written(r, 2), "gaps        6 tickets without a token (66.67 % of issued): 2, 4-7, … (1 more runs)\n")
	wantLines(t, written(Audit(program("q", 2), tokens("q", 2, 1)), 0), "issued 2 = tokens 2 + gaps 0\n  OK\n")
}

// written is r's report, listing at most limit of each kind.
func written(r Report, limit int) string {
	var b strings.Builder
	r.Write(&b, limit)
	return b.String()
}

// wantLines fails t for each of want that out lacks.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestAuditShuffle: once a shuffled pre-queue is fixed, the published
// seed must be the published key's signature of the program's commitment,
// and the places it gives the pre-queue's tickets 1..prequeue, one each; a
// tampered seed, or one signed by another key or for another shuffle,
// fails; without them, or before the pre-queue is fixed, nothing is
// checked.
func TestAuditShuffle(t *testing.T) {
	key, err := shufflekey.GenerateLocalKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := shufflekey.GenerateLocalKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := func(k shuffle.Key) string {
		pk, _ := k.PublicKey(t.Context())
		s, err := shuffle.EncodePublicKey(pk)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seed := func(k shuffle.Key, nonce string) string {
		s, err := shuffle.SignSeed(t.Context(), k, "gala", nonce)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const nonce = "00112233445566778899aabbccddeeff"
	ts := tokens("gala", 1, 2, 3, 4, 6)
	good := program("gala", 200)
	good.Shuffle, good.ShuffleNonce, good.Prequeue, good.PrequeueFixed = true, nonce, 150, true
	good.ShufflePublicKey, good.ShuffleSeed = pub(key), seed(key, nonce)
	r := Audit(good, ts)
	if !r.Shuffled || !r.Checked || r.SeedErr != "" || r.PlacesChecked != 150 || r.PlacesWrong != 0 || r.GapCount != 195 || !r.OK() {
		t.Errorf("report %+v: want the seed verified, 150 places checked, OK", r)
	}
	wantLines(t, written(r, 0), "seed verified against the key; pre-queue places: 150 checked, 0 wrong")
	tampered := []byte(good.ShuffleSeed)
	tampered[10] ^= 'A' ^ 'B'
	for name, p := range map[string]struct{ key, seed string }{
		"a tampered seed":            {seed: string(tampered)},
		"another key's seed":         {seed: seed(other, nonce)},
		"another key, its own seed":  {key: pub(other)},
		"a seed for another shuffle": {seed: seed(key, "ffeeddccbbaa99887766554433221100")},
		"no key":                     {key: "-"},
	} {
		bad := good
		bad.ShufflePublicKey, bad.ShuffleSeed = cmp.Or(p.key, good.ShufflePublicKey), cmp.Or(p.seed, good.ShuffleSeed)
		if p.key == "-" {
			bad.ShufflePublicKey = ""
		}
		if r := Audit(bad, ts); r.SeedErr == "" || r.OK() {
			t.Errorf("%s: %+v, want FAIL", name, r)
		}
	}
	unchecked := good
	unchecked.ShufflePublicKey, unchecked.ShuffleSeed = "", ""
	if r := Audit(unchecked, ts); !r.Shuffled || r.Checked || !r.OK() {
		t.Errorf("without the published key and seed: %+v, want nothing checked", r)
	}
	unchecked.PrequeueFixed = false
	if r := Audit(unchecked, ts); r.Shuffled || !r.Unrevealed || r.Checked || !r.OK() {
		t.Errorf("before the pre-queue is fixed: %+v, want nothing checked", r)
	}
}

// capped is a program with a cap of 2 and five tickets: place 1 ended by
// the site at 3 s, place 2 left by its holder at 2 s (its slot held to
// 11 s), place 3 admitted at 3 s, place 4 a no-show, place 5 waiting.
func capped() (Program, []queue.Token) {
	p := program("p", 5)
	p.MaxActiveUsers, p.NoShowSeconds, p.AdmissionWindow = 2, 5, 10*time.Second
	p.Capacity = capacity.Capacity{Ended: 1, NoShows: 1}
	p.Groups = map[int64]capacity.Group{0: {Sighted: []int64{1, 2, 3}, SealedThrough: 4, Ended: map[int64]int64{1: 1}}}
	ts := []queue.Token{
		{ID: "a", ProgramID: "p", Ticket: 1, AdmittedAt: ms(1000), AdmissionExpiresAt: ms(11_000), LeftAt: ms(3000), AdmissionPass: "pass"},
		{ID: "b", ProgramID: "p", Ticket: 2, AdmittedAt: ms(1000), AdmissionExpiresAt: ms(11_000), LeftAt: ms(2000), AdmissionPass: "pass"},
		{ID: "c", ProgramID: "p", Ticket: 3, AdmittedAt: ms(3000), AdmissionExpiresAt: ms(13_000), AdmissionPass: "pass"},
		{ID: "d", ProgramID: "p", Ticket: 4},
		{ID: "e", ProgramID: "p", Ticket: 5},
	}
	return p, ts
}

// TestAuditCapacity: the audit counts who was active at once (a session
// the site ended frees its slot at leftAt, one its holder left does not)
// and the ends, leaves and no-shows; it fails a peak above the cap, a
// program total above the records, and records that disagree.
func TestAuditCapacity(t *testing.T) {
	p, ts := capped()
	r := Audit(p, ts)
	c := r.Cap
	if c == nil || !r.OK() || c.Peak != 2 || c.PeakAtMs != 1000 || c.EndedBySite != 1 || c.LeftByHolder != 1 || c.NoShows != 1 || len(c.Findings) != 0 {
		t.Fatalf("clean: OK %v, %+v; want peak 2 at 1000, 1 ended, 1 left, 1 no-show", r.OK(), c)
	}
	out := written(r, 0)
	wantLines(t, out,
		"active      at most 2 at once (from 1970-01-01T00:00:01Z), within the cap of 2\n",
		"ended       by the site 1 (program's total 1), by their holder 1 (slot held until the window ends)\n",
		"no-shows    1 sealed and not sighted (program's total 1)\n",
		"  OK\n",
	)
	if strings.Contains(out, "totals") {
		t.Errorf("totals agree, yet a note:\n%s", out)
	}

	for _, tc := range []struct {
		name   string
		change func(p *Program, ts []queue.Token)
		ok     bool
		check  func(c *CapReport) bool
		text   string
	}{
		{
			name:   "admitted while two were active",
			change: func(_ *Program, ts []queue.Token) { ts[2].AdmittedAt = ms(2500) },
			check:  func(c *CapReport) bool { return c.Peak == 3 && c.PeakAtMs == 2500 && c.OverCap() },
			text:   "active      at most 3 at once (from 1970-01-01T00:00:02.5Z): ABOVE the cap of 2\n",
		},
		{
			// Without the site's end, place 1's slot is held to 11 s.
			name: "a holder's own leave frees nothing",
			change: func(p *Program, _ []queue.Token) {
				p.Groups[0] = capacity.Group{Sighted: []int64{1, 2, 3}, SealedThrough: 4}
				p.Capacity.Ended = 0
			},
			check: func(c *CapReport) bool {
				return c.Peak == 3 && c.PeakAtMs == 3000 && c.LeftByHolder == 2 && c.EndedBySite == 0
			},
			text: "ABOVE the cap of 2",
		},
		{
			name:   "folds behind",
			change: func(p *Program, _ []queue.Token) { p.Capacity = capacity.Capacity{} },
			ok:     true,
			check:  func(c *CapReport) bool { return c.ProgramEnded == 0 && c.EndedBySite == 1 && !c.Undercounted() },
			text:   "the program's totals are behind its records",
		},
		{
			name:   "an end counted that did not happen",
			change: func(p *Program, _ []queue.Token) { p.Capacity.Ended = 2 },
			check:  func(c *CapReport) bool { return c.Undercounted() },
			text:   "the program counted more than its records show",
		},
		{
			name:   "a no-show counted that did not happen",
			change: func(p *Program, _ []queue.Token) { p.Capacity.NoShows = 2 },
			check:  func(c *CapReport) bool { return c.Undercounted() },
			text:   "program's total 2",
		},
		{
			name:   "a no-show with a pass",
			change: func(_ *Program, ts []queue.Token) { ts[3].AdmissionPass = "pass" },
			check:  func(c *CapReport) bool { return len(c.Findings) == 1 && c.Findings[0].Place == 4 },
			text:   "inconsistent place 4 (token d): a no-show (sealed, not sighted) whose token was admitted or holds a pass\n",
		},
		{
			name: "admitted, never sighted",
			change: func(_ *Program, ts []queue.Token) {
				ts[4].AdmittedAt, ts[4].AdmissionExpiresAt = ms(20_000), ms(30_000)
			},
			check: func(c *CapReport) bool { return len(c.Findings) == 1 && c.Findings[0].Place == 5 && c.Peak == 2 },
			text:  "inconsistent place 5 (token e): admitted (admittedAt) but not sighted",
		},
		{
			name:   "ended, its token not left",
			change: func(_ *Program, ts []queue.Token) { ts[0].LeftAt = time.Time{} },
			check:  func(c *CapReport) bool { return len(c.Findings) == 1 && c.Findings[0].Place == 1 },
			text:   "inconsistent place 1 (token a): ended by the site, but its token lacks admittedAt or leftAt\n",
		},
		{
			name: "ended, never sighted",
			change: func(p *Program, _ []queue.Token) {
				p.Groups[0] = capacity.Group{Sighted: []int64{2, 3}, SealedThrough: 4, Ended: map[int64]int64{1: 1}}
			},
			check: func(c *CapReport) bool { return len(c.Findings) == 3 && c.NoShows == 2 },
			text:  "inconsistent place 1: ended by the site but never sighted\n",
		},
		{
			// The sighting is written before the token: a lost token
			// write leaves this, and it is not a failure.
			name: "sighted, not recorded",
			change: func(p *Program, _ []queue.Token) {
				p.Groups[0] = capacity.Group{Sighted: []int64{1, 2, 3, 5}, SealedThrough: 4, Ended: map[int64]int64{1: 1}}
			},
			ok:    true,
			check: func(c *CapReport) bool { return c.SightedUnrecorded == 1 && len(c.Findings) == 0 },
			text:  "sighted     1 places whose token has no admittedAt",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ts := capped()
			tc.change(&p, ts)
			r := Audit(p, ts)
			if out := written(r, 0); r.OK() != tc.ok || !tc.check(r.Cap) || !strings.Contains(out, tc.text) {
				t.Errorf("OK %v (want %v), %+v; output, want %q:\n%s", r.OK(), tc.ok, r.Cap, tc.text, out)
			}
		})
	}

	// Without a cap or no-show handling nothing of this is audited; with
	// no-show handling only, the counts are, and no peak.
	p.MaxActiveUsers, p.NoShowSeconds = 0, 0
	if r := Audit(p, ts); r.Cap != nil {
		t.Errorf("no cap: %+v, want no capacity audit", r.Cap)
	}
	p.NoShowSeconds = 5
	ts[2].AdmittedAt = ms(2500)
	r = Audit(p, ts)
	if out = written(r, 0); r.Cap == nil || !r.OK() || r.Cap.NoShows != 1 || strings.Contains(out, "active ") {
		t.Errorf("no-show handling only: OK %v, %+v\n%s", r.OK(), r.Cap, out)
	}
}

func TestDecodeGroup(t *testing.T) {
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	raw := []map[string]types.AttributeValue{{
		"pk": &types.AttributeValueMemberS{Value: "CAPGROUP#gala-2#1"}, "sk": &types.AttributeValueMemberS{Value: "CAPGROUP"},
		"sighted": &types.AttributeValueMemberNS{Value: []string{"130", "129"}}, "sealedThrough": n("140"),
		"seals":   &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"t": n("140"), "at": n("5000")}}}},
		"end_130": n("7"), "ttl": n("1700003600"),
	}}
	var items Items
	if err := Decode(raw, &items); err != nil {
		t.Fatal(err)
	}
	g := items.Groups["gala-2"][1]
	if !reflect.DeepEqual(g.Sighted, []int64{129, 130}) || g.SealedThrough != 140 || len(g.Seals) != 1 || g.Seals[0].At.UnixMilli() != 5000 || !reflect.DeepEqual(g.Ended, map[int64]int64{130: 7}) || items.Other != 0 {
		t.Errorf("group %+v, other %d", g, items.Other)
	}
	raw[0]["pk"] = &types.AttributeValueMemberS{Value: "CAPGROUP#gala"}
	if err := Decode(raw, &items); err == nil {
		t.Error("Decode accepted a group without its number")
	}
}

// TestAuditMoves: a handoff leaves the old token (movedTo, movedMs) and
// the new one with the same ticket: the moved one holds no ticket, so the
// ticket is no duplicate and issued balances; a move that names a token
// not stored yet leaves a gap, not a failure; a move of an admitted or an
// account's token, to another ticket, named twice or in a cycle fails.
func TestAuditMoves(t *testing.T) {
	mv := func(id string, ticket int64, to string) queue.Token {
		return queue.Token{ID: id, ProgramID: "p", Ticket: ticket, MovedTo: to, MovedAt: ms(5)}
	}
	for _, tc := range []struct {
		name           string
		tokens         []queue.Token
		moved, pending int
		gaps           int64
		bad            []string // the bad moves' tokens and problems
	}{
		{name: "one move", tokens: []queue.Token{mv("a", 1, "b"), {ID: "b", ProgramID: "p", Ticket: 1}, {ID: "c", ProgramID: "p", Ticket: 2}}, moved: 1},
		{name: "a chain", tokens: []queue.Token{mv("a", 1, "b"), mv("b", 1, "c"), {ID: "c", ProgramID: "p", Ticket: 1}, {ID: "d", ProgramID: "p", Ticket: 2}}, moved: 2},
		{name: "pending", tokens: []queue.Token{mv("a", 1, "gone"), {ID: "c", ProgramID: "p", Ticket: 2}}, moved: 1, pending: 1, gaps: 1},
		{
			name:   "admitted",
			tokens: []queue.Token{{ID: "a", ProgramID: "p", Ticket: 1, MovedTo: "b", MovedAt: ms(5), AdmittedAt: ms(4)}, {ID: "b", ProgramID: "p", Ticket: 1}, {ID: "c", ProgramID: "p", Ticket: 2}},
			moved:  1, bad: []string{"a: moved, yet admitted (admittedAt or a pass)"},
		},
		{
			name:   "account",
			tokens: []queue.Token{{ID: "a", ProgramID: "p", Ticket: 1, MovedTo: "b", MovedAt: ms(5), Account: "alice"}, {ID: "b", ProgramID: "p", Ticket: 1}, {ID: "c", ProgramID: "p", Ticket: 2}},
			moved:  1, bad: []string{"a: an account's place moved by a handoff (it follows the account)"},
		},
		{
			name:   "half set",
			tokens: []queue.Token{{ID: "a", ProgramID: "p", Ticket: 1, MovedAt: ms(5)}, {ID: "b", ProgramID: "p", Ticket: 1}, {ID: "c", ProgramID: "p", Ticket: 2}},
			moved:  1, bad: []string{"a: movedTo and movedMs are not both set"},
		},
		{
			name:   "other ticket",
			tokens: []queue.Token{mv("a", 1, "c"), {ID: "b", ProgramID: "p", Ticket: 1}, {ID: "c", ProgramID: "p", Ticket: 2}},
			moved:  1, bad: []string{"a: moved to token c, which holds ticket 2"},
		},
		{
			name:   "named twice",
			tokens: []queue.Token{mv("a", 1, "c"), mv("b", 1, "c"), {ID: "c", ProgramID: "p", Ticket: 1}, {ID: "d", ProgramID: "p", Ticket: 2}},
			moved:  2, bad: []string{"a: moved to token c, as b was too", "b: moved to token c, as a was too"},
		},
		{
			name:   "cycle",
			tokens: []queue.Token{mv("a", 1, "b"), mv("b", 1, "a"), {ID: "c", ProgramID: "p", Ticket: 2}},
			moved:  2, gaps: 1, bad: []string{"a: its moves form a cycle: no token holds its ticket", "b: its moves form a cycle: no token holds its ticket"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Audit(program("p", 2), append(tc.tokens, queue.Token{ID: "x", ProgramID: "other", Ticket: 1, MovedTo: "y", MovedAt: ms(5)}, queue.Token{ID: "y", ProgramID: "other", Ticket: 2}))
			var bad []string
			for _, f := range r.BadMoves {
				bad = append(bad, f.Token+": "+f.Problem)
			}
			if r.Moved != tc.moved || r.MovesPending != tc.pending || r.GapCount != tc.gaps || !reflect.DeepEqual(bad, tc.bad) {
				t.Errorf("moved %d, pending %d, gaps %d, bad moves %q; want %d, %d, %d, %q", r.Moved, r.MovesPending, r.GapCount, bad, tc.moved, tc.pending, tc.gaps, tc.bad)
			}
			if ok := len(tc.bad) == 0; r.OK() != ok || len(r.Duplicates) != 0 || !r.Balanced() || r.Tokens != len(tc.tokens)-tc.moved {
				t.Errorf("OK %v, duplicates %v, balanced %v, tokens %d; want OK %v, none, balanced, %d", r.OK(), r.Duplicates, r.Balanced(), r.Tokens, ok, len(tc.tokens)-tc.moved)
			}
		})
	}
	r := Audit(program("p", 2), []queue.Token{mv("a", 1, "b"), mv("c", 2, "gone"), {ID: "b", ProgramID: "p", Ticket: 1}})
	wantLines(t, written(r, 0),
		"tokens      1 (admission seen by a poll 0, of them ended early 0; left 0, neither recorded 1)\n",
		"moved       2 tokens by handoffs, not counted above (each names the token that holds its ticket now; 1 name one not in the table: a redeem not finished, its ticket a gap)\n",
		"issued 2 = tokens 1 + gaps 1\n  OK\n")
	r = Audit(program("p", 2), []queue.Token{mv("a", 1, "b"), {ID: "b", ProgramID: "p", Ticket: 2}, {ID: "c", ProgramID: "p", Ticket: 1}})
	wantLines(t, written(r, 0), "bad move: ticket 1, token a: moved to token b, which holds ticket 2\n", "FAIL\n")
}

// TestAuditAccounts: an account's places are counted; an account holding
// two places in a program fails (one place per account), in two programs
// does not.
func TestAuditAccounts(t *testing.T) {
	acct := func(id, program string, ticket int64, account string) queue.Token {
		return queue.Token{ID: id, ProgramID: program, Ticket: ticket, Account: account}
	}
	r := Audit(program("p", 3), []queue.Token{acct("a", "p", 1, "alice"), acct("b", "p", 2, "bob"), acct("c", "p", 3, ""), acct("d", "q", 1, "alice")})
	if r.Accounts != 2 || len(r.SharedAccounts) != 0 || !r.OK() {
		t.Errorf("accounts %d, shared %v, OK %v; want 2, none, OK", r.Accounts, r.SharedAccounts, r.OK())
	}
	wantLines(t, written(r, 0), "accounts    2 tokens are accounts' places (enqueue tokens), 0 accounts hold more than one\n")
	r = Audit(program("p", 3), []queue.Token{acct("b", "p", 2, "alice"), acct("a", "p", 1, "alice"), acct("c", "p", 3, "")})
	if want := []AccountPlaces{{"alice", []string{"a", "b"}}}; r.Accounts != 2 || !reflect.DeepEqual(r.SharedAccounts, want) || r.OK() {
		t.Errorf("accounts %d, shared %v, OK %v; want 2, %v, not OK", r.Accounts, r.SharedAccounts, r.OK(), want)
	}
	wantLines(t, written(r, 0), `account "alice" holds 2 places: tokens a, b`+"\n", "FAIL\n")
}
