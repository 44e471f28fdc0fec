package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shuffle"
)

// Program is a program's item (with the flags' shuffle key and seed) and its capacity groups by number.
type Program struct {
	admission.Program
	Groups map[int64]capacity.Group
}

// Items are the decoded items of a table.
type Items struct {
	Programs              map[string]Program
	Tokens                []queue.Token                       // but the claims (claimId, no ticket)
	Shards, Other, Claims int                                 // Other: items of no kind the audit reads
	Handoffs              int                                 // handoff codes' items (HANDOFF#), live or not yet swept
	Groups                map[string]map[int64]capacity.Group // by program and number
}

// Decode adds scanned items to into, sorted by their keys.
func Decode(items []map[string]types.AttributeValue, into *Items) error {
	if into.Programs == nil {
		into.Programs = map[string]Program{}
	}
	if into.Groups == nil {
		into.Groups = map[string]map[int64]capacity.Group{}
	}
	for _, av := range items {
		var key struct {
			PK string `dynamodbav:"pk"`
			SK string `dynamodbav:"sk"`
		}
		if err := attributevalue.UnmarshalMap(av, &key); err != nil {
			return fmt.Errorf("decode key: %w", err)
		}
		if err := into.add(key.PK, key.SK, av); err != nil {
			return fmt.Errorf("decode %s: %w", key.PK, err)
		}
	}
	return nil
}

// add sorts the item av, keyed pk and sk, into items.
func (items *Items) add(pk, sk string, av map[string]types.AttributeValue) error {
	if !strings.HasPrefix(pk, sk+"#") {
		sk = "" // not an item of the audit's kinds
	}
	switch sk {
	case "PROGRAM":
		p, err := dynamostore.DecodeProgram(av)
		if err != nil {
			return err
		}
		items.Programs[p.ID] = Program{Program: p}
	case "SHARD":
		items.Shards++
	case "HANDOFF":
		items.Handoffs++
	case "TOKEN":
		t, err := dynamostore.DecodeToken(av)
		if err != nil {
			return err
		}
		if t.Claim != "" && t.Ticket == 0 {
			items.Claims++
		} else {
			items.Tokens = append(items.Tokens, t)
		}
	case "CAPGROUP":
		rest := strings.TrimPrefix(pk, "CAPGROUP#")
		i := strings.LastIndexByte(rest, '#')
		if i < 0 {
			return errors.New("no group number")
		}
		g, err := strconv.ParseInt(rest[i+1:], 10, 64)
		grp, derr := dynamostore.DecodeGroup(av)
		if err = cmp.Or(err, derr); err != nil {
			return err
		}
		if items.Groups[rest[:i]] == nil {
			items.Groups[rest[:i]] = map[int64]capacity.Group{}
		}
		items.Groups[rest[:i]][g] = grp
	default:
		items.Other++
	}
	return nil
}

// Range is a run of consecutive tickets, From..To inclusive.
type Range struct{ From, To int64 }

func (r Range) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Duplicate is a ticket held by more than one token.
type Duplicate struct {
	Ticket int64
	Tokens []string // sorted
}

// AccountPlaces is an account holding more than one place in a program.
type AccountPlaces struct {
	Account string
	Tokens  []string // sorted
}

// Report is the audit of one program.
type Report struct {
	Program string
	Missing bool // tokens name the program but it has no item: Issued is 0, every ticket out of range
	Issued  int64
	// Tokens counts the program's token items: AdmittedSeen have admittedAt
	// (Ended of them leftAt too), Left leftAt only, Unrecorded neither
	// (waiting, or admitted and not polled since).
	Tokens                                int
	AdmittedSeen, Ended, Left, Unrecorded int
	// Moved counts the token items a handoff moved (movedTo, movedMs): they
	// hold no ticket, the token each names holds it, and are not in Tokens.
	// MovesPending of them name a token not in the table (a redeem whose
	// write of it has not happened yet, or that TTL swept): its ticket is a
	// gap until it is. BadMoves are the moves that break the rules: a moved
	// token admitted, or an account's, or naming a token of another ticket,
	// one named by two, or a cycle.
	Moved, MovesPending int
	BadMoves            []Finding // Place: the moved token's ticket
	// Accounts counts the tokens in Tokens that are an account's place (an
	// enqueue token's sub); SharedAccounts the accounts holding two or more.
	Accounts       int
	SharedAccounts []AccountPlaces
	Duplicates     []Duplicate   // tickets held by two tokens or more, ascending
	OutOfRange     []queue.Token // tokens whose ticket is not in 1..Issued, by ticket
	Gaps           []Range       // tickets in 1..Issued no token holds, as ascending runs
	GapCount       int64         // the tickets in Gaps
	GapLimit       float64       // when positive, the largest fraction of Issued the gaps may reach
	// Shuffled: a shuffled opening whose pre-queue is fixed; Unrevealed:
	// one not fixed yet; Checked: key and seed were given. SeedErr says why
	// the seed does not verify; PlacesWrong counts the pre-queue places
	// repeated or out of 1..Prequeue, PlacesChecked the others.
	Shuffled, Unrevealed, Checked bool
	SeedErr                       string
	PlacesChecked, PlacesWrong    int64
	Cap                           *CapReport // a program with a cap or no-show handling; nil for others
}

// Balanced reports whether Issued equals the token items plus the gaps.
func (r Report) Balanced() bool { return int64(r.Tokens)+r.GapCount == r.Issued }

// GapsOver reports whether the gaps exceed GapLimit.
func (r Report) GapsOver() bool {
	return r.GapLimit > 0 && float64(r.GapCount) > r.GapLimit*float64(r.Issued)
}

// OK reports whether the program passes every check of the audit.
func (r Report) OK() bool {
	return len(r.Duplicates) == 0 && len(r.OutOfRange) == 0 && len(r.BadMoves) == 0 && len(r.SharedAccounts) == 0 && r.Balanced() && !r.GapsOver() && r.SeedErr == "" && r.PlacesWrong == 0 &&
		(r.Cap == nil || r.Cap.OK())
}

// Audit checks the tokens of program p, ignoring other programs'.
func Audit(p Program, tokens []queue.Token) Report {
	r := Report{Program: p.ID, Issued: p.Issued, Shuffled: p.Shuffle && p.PrequeueFixed, Unrevealed: p.Shuffle && !p.PrequeueFixed}
	holders := map[int64][]string{}
	mine := map[string]queue.Token{} // the program's tokens by id
	accounts := map[string][]string{}
	var held []queue.Token        // but the moved
	into := map[string][]string{} // the moved tokens by the token they name
	for _, t := range tokens {
		if t.ProgramID == p.ID {
			mine[t.ID] = t
			if t.MovedTo != "" {
				into[t.MovedTo] = append(into[t.MovedTo], t.ID)
			}
		}
	}
	for _, t := range tokens {
		if t.ProgramID != p.ID {
			continue
		}
		if moved(t) {
			r.Moved++
			r.checkMove(t, mine, into[t.MovedTo])
			if t.Ticket < 1 || t.Ticket > p.Issued {
				r.OutOfRange = append(r.OutOfRange, t)
			}
			continue
		}
		held = append(held, t)
		r.Tokens++
		if t.Account != "" {
			r.Accounts++
			accounts[t.Account] = append(accounts[t.Account], t.ID)
		}
		switch {
		case !t.AdmittedAt.IsZero():
			r.AdmittedSeen++
			if !t.LeftAt.IsZero() {
				r.Ended++
			}
		case !t.LeftAt.IsZero():
			r.Left++
		default:
			r.Unrecorded++
		}
		if t.Ticket < 1 || t.Ticket > p.Issued {
			r.OutOfRange = append(r.OutOfRange, t)
			continue
		}
		holders[t.Ticket] = append(holders[t.Ticket], t.ID)
	}
	if r.Shuffled && (p.ShufflePublicKey != "" || p.ShuffleSeed != "") {
		r.Checked = true
		r.checkShuffle(p)
	}
	if p.Followed() {
		r.Cap = auditCapacity(p, held, r.Checked && r.SeedErr == "" && r.PlacesWrong == 0)
	}
	for _, a := range slices.Sorted(maps.Keys(accounts)) {
		if ids := accounts[a]; len(ids) > 1 {
			slices.Sort(ids)
			r.SharedAccounts = append(r.SharedAccounts, AccountPlaces{Account: a, Tokens: ids})
		}
	}
	slices.SortStableFunc(r.BadMoves, func(a, b Finding) int { return cmp.Or(cmp.Compare(a.Place, b.Place), cmp.Compare(a.Token, b.Token)) })
	slices.SortFunc(r.OutOfRange, func(a, b queue.Token) int { return cmp.Or(cmp.Compare(a.Ticket, b.Ticket), cmp.Compare(a.ID, b.ID)) })
	tickets := slices.Sorted(maps.Keys(holders))
	for _, ticket := range tickets {
		if ids := holders[ticket]; len(ids) > 1 {
			slices.Sort(ids)
			r.Duplicates = append(r.Duplicates, Duplicate{Ticket: ticket, Tokens: ids})
		}
	}
	next := int64(1) // the lowest ticket not yet accounted for
	for _, ticket := range append(tickets, p.Issued+1) {
		if ticket > next {
			r.Gaps = append(r.Gaps, Range{next, ticket - 1})
			r.GapCount += ticket - next
		}
		next = ticket + 1
	}
	return r
}

// moved reports whether a handoff moved t's place to another token.
func moved(t queue.Token) bool { return t.MovedTo != "" || !t.MovedAt.IsZero() }

// checkMove checks moved token t against the program's tokens by id: it
// was waiting, no account's, and names a token of its ticket that no other
// moved token names (same: the moved tokens naming it), at the end of a
// chain of moves that is no cycle.
func (r *Report) checkMove(t queue.Token, tokens map[string]queue.Token, same []string) {
	bad := func(problem string) {
		r.BadMoves = append(r.BadMoves, Finding{Place: t.Ticket, Token: t.ID, Problem: problem})
	}
	switch {
	case t.MovedTo == "" || t.MovedAt.IsZero():
		bad("movedTo and movedMs are not both set")
		return
	case !t.AdmittedAt.IsZero() || t.AdmissionPass != "":
		bad("moved, yet admitted (admittedAt or a pass)")
	case !t.LeftAt.IsZero() || !t.RevokedAt.IsZero():
		bad("moved, yet left or revoked too")
	case t.Account != "":
		bad("an account's place moved by a handoff (it follows the account)")
	}
	to, ok := tokens[t.MovedTo]
	switch {
	case !ok:
		r.MovesPending++
		return
	case to.Ticket != t.Ticket:
		bad(fmt.Sprintf("moved to token %s, which holds ticket %d", to.ID, to.Ticket))
		return
	}
	if others := slices.DeleteFunc(slices.Clone(same), func(id string) bool { return id == t.ID }); len(others) > 0 {
		slices.Sort(others)
		bad(fmt.Sprintf("moved to token %s, as %s was too", t.MovedTo, strings.Join(others, ", ")))
	}
	for seen, at := 1, to; moved(at); seen++ { // the chain of moves from t
		if at.ID == t.ID || seen > len(tokens) {
			bad("its moves form a cycle: no token holds its ticket")
			return
		}
		if at, ok = tokens[at.MovedTo]; !ok {
			return
		}
	}
}

// checkShuffle verifies p's seed against its key and commitment, and that the pre-queue's places are a
// permutation of 1..Prequeue.
func (r *Report) checkShuffle(p Program) {
	pub, err := shuffle.ParsePublicKey(p.ShufflePublicKey)
	if err == nil {
		err = shuffle.VerifySeed(pub, shuffle.Message(p.ID, p.ShuffleNonce), p.ShuffleSeed)
	}
	if err != nil {
		r.SeedErr = err.Error()
		return
	}
	taken := make([]bool, p.Prequeue+1)
	for ticket := int64(1); ticket <= p.Prequeue; ticket++ {
		place := shuffle.PlaceOf(p.ShuffleSeed, p.Prequeue, ticket)
		if place < 1 || place > p.Prequeue || taken[place] {
			r.PlacesWrong++
			continue
		}
		taken[place] = true
		r.PlacesChecked++
	}
}

// AuditAll audits, by id, every program of items and every id only tokens name (or only id if not "").
func AuditAll(items Items, id string) []Report {
	ids := map[string]bool{}
	for pid := range items.Programs {
		ids[pid] = true
	}
	for _, t := range items.Tokens {
		ids[t.ProgramID] = true
	}
	var reports []Report
	for _, pid := range slices.Sorted(maps.Keys(ids)) {
		if id != "" && pid != id {
			continue
		}
		p, ok := items.Programs[pid] // without an item, a program of no tickets
		p.ID, p.Groups = pid, items.Groups[pid]
		r := Audit(p, items.Tokens)
		r.Missing = !ok
		reports = append(reports, r)
	}
	return reports
}

// Write prints r, listing at most limit of each kind of problem (all when limit <= 0).
func (r Report) Write(w io.Writer, limit int) {
	fmt.Fprintf(w, "program %s%s\n  issued      %d\n", r.Program, either(r.Missing, " (no program item: tokens only)", ""), r.Issued)
	fmt.Fprintf(w, "  tokens      %d (admission seen by a poll %d, of them ended early %d; left %d, neither recorded %d)\n", r.Tokens, r.AdmittedSeen, r.Ended, r.Left, r.Unrecorded)
	extra := 0
	for _, d := range r.Duplicates {
		extra += len(d.Tokens) - 1
	}
	if r.Moved > 0 {
		fmt.Fprintf(w, "  moved       %d tokens by handoffs, not counted above (each names the token that holds its ticket now", r.Moved)
		if r.MovesPending > 0 {
			fmt.Fprintf(w, "; %d name one not in the table: a redeem not finished, its ticket a gap", r.MovesPending)
		}
		fmt.Fprintln(w, ")")
	}
	if r.Accounts > 0 {
		fmt.Fprintf(w, "  accounts    %d tokens are accounts' places (enqueue tokens), %d accounts hold more than one\n", r.Accounts, len(r.SharedAccounts))
	}
	fmt.Fprintf(w, "  duplicates  %d tickets (%d extra tokens)\n", len(r.Duplicates), extra)
	fmt.Fprintf(w, "  out of range %d tokens (ticket not in 1..%d)\n", len(r.OutOfRange), r.Issued)
	fmt.Fprintf(w, "  gaps        %d tickets without a token", r.GapCount)
	if r.Issued > 0 {
		fmt.Fprintf(w, " (%.2f %% of issued", 100*float64(r.GapCount)/float64(r.Issued))
		if r.GapLimit > 0 {
			fmt.Fprintf(w, ", %s the limit of %g %%", either(r.GapsOver(), "above", "within"), 100*r.GapLimit)
		}
		fmt.Fprint(w, ")")
	}
	for i, g := range r.Gaps {
		if limit > 0 && i == limit {
			fmt.Fprintf(w, ", … (%d more runs)", len(r.Gaps)-limit)
			break
		}
		fmt.Fprintf(w, "%s%v", either(i == 0, ": ", ", "), g)
	}
	fmt.Fprintln(w)
	writeList(w, r.Duplicates, limit, "duplicated tickets", func(d Duplicate) {
		fmt.Fprintf(w, "  duplicate ticket %d: tokens %s\n", d.Ticket, strings.Join(d.Tokens, ", "))
	})
	writeList(w, r.OutOfRange, limit, "tokens out of range", func(t queue.Token) {
		fmt.Fprintf(w, "  out of range: ticket %d, token %s\n", t.Ticket, t.ID)
	})
	writeList(w, r.BadMoves, limit, "bad moves", func(f Finding) {
		fmt.Fprintf(w, "  bad move: ticket %d, token %s: %s\n", f.Place, f.Token, f.Problem)
	})
	writeList(w, r.SharedAccounts, limit, "accounts with two places", func(a AccountPlaces) {
		fmt.Fprintf(w, "  account %q holds %d places: tokens %s\n", a.Account, len(a.Tokens), strings.Join(a.Tokens, ", "))
	})
	switch {
	case r.SeedErr != "":
		fmt.Fprintf(w, "  shuffle     the seed is NOT the key's signature of the commitment: %s\n", r.SeedErr)
	case r.Checked:
		fmt.Fprintf(w, "  shuffle     seed verified against the key; pre-queue places: %d checked, %d wrong (repeated or out of range)\n", r.PlacesChecked, r.PlacesWrong)
	case r.Shuffled:
		fmt.Fprintln(w, "  shuffle     pre-queue fixed; not checked (give -shuffle-key and -shuffle-seed from an answer)")
	case r.Unrevealed:
		fmt.Fprintln(w, "  shuffle     armed, pre-queue not fixed yet: no seed exists, nothing to check")
	}
	if r.Cap != nil {
		r.Cap.write(w, limit)
	}
	fmt.Fprintf(w, "  issued %d %s tokens %d + gaps %d\n", r.Issued, either(r.Balanced(), "=", "≠"), r.Tokens, r.GapCount)
	fmt.Fprintln(w, either(r.OK(), "  OK", "  FAIL"))
}

// either is yes when b holds, else no.
func either[T any](b bool, yes, no T) T {
	if b {
		return yes
	}
	return no
}

// writeList prints at most limit of xs (all when limit <= 0) with line, then how many more what there are.
func writeList[T any](w io.Writer, xs []T, limit int, what string, line func(T)) {
	for i, x := range xs {
		if limit > 0 && i == limit {
			fmt.Fprintf(w, "  … %d more %s\n", len(xs)-limit, what)
			return
		}
		line(x)
	}
}
