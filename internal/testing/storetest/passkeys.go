package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
)

// racingClaims is how many makers claim one signing slot at once.
const racingClaims = 8

// PassKeys holds s, which must hold no key yet, to admissionpass.KeyStore's
// contract.
func PassKeys(t *testing.T, s admissionpass.KeyStore) {
	ctx := t.Context()
	// Each subtest has slots of its own, a day and a millisecond apart.
	day := 0
	slot := func() time.Time {
		day++
		return t0.Add(time.Duration(day)*24*time.Hour + ms(int64(day)))
	}
	// stored lists the keys, checks their order, and returns those in slots.
	stored := func(t *testing.T, slots ...time.Time) []admissionpass.StoredKey {
		t.Helper()
		all := answer(s.PassKeys(ctx)).must(t, "PassKeys")
		var in []admissionpass.StoredKey
		for i, k := range all {
			if i > 0 && !all[i-1].SignFrom.Before(k.SignFrom) {
				t.Errorf("PassKeys: key %d signs from %v, key %d from %v: want them by SignFrom", i-1, all[i-1].SignFrom, i, k.SignFrom)
			}
			for _, sl := range slots {
				if k.SignFrom.Equal(sl) {
					in = append(in, k)
				}
			}
		}
		return in
	}
	checkStored := func(t *testing.T, want []admissionpass.StoredKey, slots ...time.Time) {
		t.Helper()
		check(t, "stored keys", stored(t, slots...), want)
	}
	claimed := func(t *testing.T, signFrom time.Time, claim string, now, staleBefore time.Time, want bool) {
		t.Helper()
		checkCall(t, fmt.Sprintf("ClaimPassKey(%s, %q, now %v, stale before %v)", signFrom, claim, now, staleBefore), answer(s.ClaimPassKey(ctx, signFrom, claim, now, staleBefore)), want)
	}
	put := func(t *testing.T, k admissionpass.StoredKey, claim string, want bool) {
		t.Helper()
		checkCall(t, fmt.Sprintf("PutPassKey(%s %s, %q)", k.SignFrom, k.KeyID, claim), answer(s.PutPassKey(ctx, k, claim)), want)
	}
	at := t0.Add(ms(1_500)) // when the claims are made
	fresh := at.Add(-time.Minute)

	t.Run("Empty", func(t *testing.T) {
		checkCall(t, "PassKeys on an empty store", answer(s.PassKeys(ctx)), nil)
	})

	t.Run("RoundTrip", func(t *testing.T) {
		sf := slot()
		claimed(t, sf, "maker", at, fresh, true)
		checkStored(t, nil, sf) // a claim is no key
		k := passKey(sf, "round-trip")
		put(t, k, "maker", true)
		want := passKey(sf, "round-trip")
		checkStored(t, []admissionpass.StoredKey{want}, sf)
		// The store keeps bytes of its own.
		k.Public[0]++
		k.Wrapped[0]++
		got := stored(t, sf)
		if len(got) == 1 {
			got[0].Public[0]++
			got[0].Wrapped[0]++
		}
		checkStored(t, []admissionpass.StoredKey{want}, sf)
	})

	t.Run("Claim", func(t *testing.T) {
		for _, tc := range []struct {
			name, held string // held: the claim made at at before ("": none)
			filled     bool   // whether held put its key
			claim      string
			now, stale time.Time
			want       bool
		}{
			{name: "free slot", claim: "b", now: at, stale: fresh, want: true},
			{name: "another claim's, not stale", held: "a", claim: "b", now: at.Add(time.Minute), stale: at, want: false},
			{name: "another claim's, stale", held: "a", claim: "b", now: at.Add(time.Minute), stale: at.Add(ms(1)), want: true},
			{name: "its own again", held: "a", claim: "a", now: at.Add(ms(10)), stale: fresh, want: true},
			{name: "holding a key", held: "a", filled: true, claim: "b", now: at.Add(time.Hour), stale: at.Add(time.Minute), want: false},
			{name: "holding a key, by its maker", held: "a", filled: true, claim: "a", now: at.Add(time.Hour), stale: at.Add(time.Minute), want: false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sf := slot()
				k := passKey(sf, "claimed")
				var keys []admissionpass.StoredKey
				if tc.held != "" {
					claimed(t, sf, tc.held, at, fresh, true)
				}
				if tc.filled {
					put(t, k, tc.held, true)
					keys = append(keys, k)
				}
				claimed(t, sf, tc.claim, tc.now, tc.stale, tc.want)
				checkStored(t, keys, sf)
				if tc.filled {
					return
				}
				holder := tc.held // whose key the slot takes
				if tc.want {
					holder = tc.claim
				}
				if tc.claim != holder {
					put(t, k, tc.claim, false)
				}
				if tc.held != "" && tc.held != holder {
					put(t, k, tc.held, false)
				}
				checkStored(t, nil, sf)
				put(t, k, holder, true)
				checkStored(t, []admissionpass.StoredKey{k}, sf)
			})
		}
	})

	t.Run("Put", func(t *testing.T) {
		type claimStep struct {
			claim      string
			now, stale time.Time
		}
		type putStep struct {
			key   int // of the slot's two keys
			claim string
			want  bool
		}
		for _, tc := range []struct {
			name   string
			claims []claimStep
			puts   []putStep
			stored []int // the slot's keys stored in the end
		}{
			{"by its claim", []claimStep{{"a", at, fresh}}, []putStep{{0, "a", true}}, []int{0}},
			{"with no claim", nil, []putStep{{0, "a", false}}, nil},
			{"by a claim that lost its slot", []claimStep{{"a", at, fresh}, {"b", at.Add(time.Minute), at.Add(ms(1))}}, []putStep{{0, "a", false}}, nil},
			{"retried", []claimStep{{"a", at, fresh}}, []putStep{{0, "a", true}, {0, "a", true}}, []int{0}},
			{"another key after its own", []claimStep{{"a", at, fresh}}, []putStep{{0, "a", true}, {1, "a", false}}, []int{0}},
			{"by the claim that lost, after the key", []claimStep{{"a", at, fresh}, {"b", at.Add(time.Minute), at.Add(ms(1))}}, []putStep{{1, "b", true}, {0, "a", false}}, []int{1}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sf := slot()
				keys := []admissionpass.StoredKey{passKey(sf, "first"), passKey(sf, "second")}
				for _, c := range tc.claims {
					claimed(t, sf, c.claim, c.now, c.stale, true)
				}
				for _, p := range tc.puts {
					put(t, keys[p.key], p.claim, p.want)
				}
				var want []admissionpass.StoredKey
				for _, i := range tc.stored {
					want = append(want, keys[i])
				}
				checkStored(t, want, sf)
			})
		}
	})

	t.Run("Order", func(t *testing.T) {
		first, second, third := slot(), slot(), slot()
		for _, sf := range []time.Time{second, third, first} {
			claimed(t, sf, "maker", at, fresh, true)
			put(t, passKey(sf, "ordered"), "maker", true)
		}
		checkStored(t, []admissionpass.StoredKey{passKey(first, "ordered"), passKey(second, "ordered"), passKey(third, "ordered")}, first, second, third)
	})

	t.Run("Revoke", func(t *testing.T) {
		sf, other, unfilled := slot(), slot(), slot()
		k, o := passKey(sf, "revoked"), passKey(other, "kept")
		for _, key := range []admissionpass.StoredKey{k, o} {
			claimed(t, key.SignFrom, "maker", at, fresh, true)
			put(t, key, "maker", true)
		}
		claimed(t, unfilled, "maker", at, fresh, true)
		revoked := func(t *testing.T, kid string, when time.Time, want admissionpass.StoredKey, wantErr error) {
			t.Helper()
			got, err := s.RevokePassKey(ctx, kid, when)
			checkErr(t, fmt.Sprintf("RevokePassKey(%q)", kid), err, wantErr)
			check(t, fmt.Sprintf("RevokePassKey(%q)", kid), got, want)
		}
		first := t0.Add(2*time.Hour + ms(4_321))
		want := k
		want.Revoked = first
		revoked(t, k.KeyID, first, want, nil)
		checkStored(t, []admissionpass.StoredKey{want, o}, sf, other, unfilled)
		revoked(t, k.KeyID, first.Add(time.Hour), want, nil) // keeps the first instant
		checkStored(t, []admissionpass.StoredKey{want, o}, sf, other, unfilled)
		revoked(t, "no-such-kid", first, admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound)
		revoked(t, "", first, admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound) // the claim's slot has none
	})

	t.Run("ClaimConcurrent", func(t *testing.T) {
		sf := slot()
		winner := oneWins(t, "racing ClaimPassKey", racingClaims, func(i int) (bool, error) {
			return s.ClaimPassKey(ctx, sf, fmt.Sprint("racer-", i), at, fresh)
		})
		k := passKey(sf, "raced")
		put(t, k, fmt.Sprint("racer-", (winner+1)%racingClaims), false)
		put(t, k, fmt.Sprint("racer-", winner), true)
		checkStored(t, []admissionpass.StoredKey{k}, sf)
	})
}

// passKey is a key of slot signFrom named name, made an hour before it signs,
// kept for three days after (not on a second).
func passKey(signFrom time.Time, name string) admissionpass.StoredKey {
	kid := fmt.Sprintf("kid-%s-%d", name, signFrom.UnixMilli())
	return admissionpass.StoredKey{SignFrom: signFrom, KeyID: kid, Public: []byte("public " + kid), Wrapped: []byte{0x01, 0x02, 0x00, 0xff, byte(len(kid))},
		Created: signFrom.Add(-time.Hour + ms(234)), Expires: signFrom.Add(72*time.Hour + ms(500))}
}
