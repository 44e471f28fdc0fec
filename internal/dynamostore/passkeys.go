package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/pace"
)

// The pass-signing keys: one partition, an item per signing slot, sorted by its start.
const (
	passKeysPK     = "PASSKEYS"
	passKeyPrefix  = "KEY#"
	passKeyMsWidth = 15 // zero-padded so that sort keys order as the instants do
)

var _ admissionpass.KeyStore = (*Store)(nil)

func passKeySK(signFrom time.Time) string {
	return fmt.Sprintf("%s%0*d", passKeyPrefix, passKeyMsWidth, pace.UnixMs(signFrom))
}

func passKeyKey(signFrom time.Time) map[string]types.AttributeValue {
	return itemKey(passKeysPK, passKeySK(signFrom))
}

// passKeyItem is a signing slot's item: its maker's claim and, once put, its key.
type passKeyItem struct {
	SK        string `dynamodbav:"sk"`
	KeyID     string `dynamodbav:"keyId"`
	Public    []byte `dynamodbav:"public"`
	Wrapped   []byte `dynamodbav:"wrapped"`
	CreatedMs int64  `dynamodbav:"createdMs"`
	RevokedMs int64  `dynamodbav:"revokedMs"`
	ClaimID   string `dynamodbav:"claimId"`
	ClaimMs   int64  `dynamodbav:"claimMs"`
	TTL       int64  `dynamodbav:"ttl"`
}

func (it passKeyItem) key() (admissionpass.StoredKey, error) {
	ms, err := strconv.ParseInt(strings.TrimPrefix(it.SK, passKeyPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(it.SK, passKeyPrefix) {
		return admissionpass.StoredKey{}, fmt.Errorf("sort key %q is no signing slot", it.SK)
	}
	return admissionpass.StoredKey{
		SignFrom: pace.FromUnixMs(ms), KeyID: it.KeyID, Public: it.Public, Wrapped: it.Wrapped,
		Created: pace.FromUnixMs(it.CreatedMs), Revoked: pace.FromUnixMs(it.RevokedMs), Expires: fromTTL(it.TTL),
	}, nil
}

var (
	slotKeyID, slotClaimID, slotClaimMs = expression.Name("keyId"), expression.Name("claimId"), expression.Name("claimMs")
	slotRevokedMs                       = expression.Name("revokedMs")
)

// PassKeys implements admissionpass.KeyStore with one strongly consistent query.
func (s *Store) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	items, err := s.passKeyItems(ctx)
	keys := make([]admissionpass.StoredKey, len(items))
	for i := 0; err == nil && i < len(items); i++ {
		keys[i], err = items[i].key()
	}
	if err != nil {
		return nil, opErr(err, "list pass keys")
	}
	return keys, nil
}

// passKeyItems reads the slots that hold a key, by SignFrom.
func (s *Store) passKeyItems(ctx context.Context) ([]passKeyItem, error) {
	key := expression.Key("pk").Equal(expression.Value(passKeysPK)).
		And(expression.Key("sk").BeginsWith(passKeyPrefix))
	items, err := query[passKeyItem](ctx, s, key, true, 0)
	return slices.DeleteFunc(items, func(it passKeyItem) bool { return it.KeyID == "" }), err // claims
}

// ClaimPassKey implements admissionpass.KeyStore: one UpdateItem on a slot
// without a key whose claim is absent, stale or claim's own (a retry).
func (s *Store) ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error) {
	free := expression.Or(expression.AttributeNotExists(slotClaimMs),
		slotClaimMs.LessThan(expression.Value(pace.UnixMs(staleBefore))),
		slotClaimID.Equal(expression.Value(claim)))
	cond := expression.AttributeNotExists(slotKeyID).And(free)
	upd := expression.Set(slotClaimID, expression.Value(claim)).Set(slotClaimMs, expression.Value(pace.UnixMs(now)))
	w, err := s.update(ctx, passKeyKey(signFrom), cond, upd, types.ReturnValueNone)
	return w.ok, opErr(err, "claim pass key %s", passKeySK(signFrom))
}

// PutPassKey implements admissionpass.KeyStore: one UpdateItem on the claim
// and no key; when it fails, true if the slot holds k's kid already (a retry).
func (s *Store) PutPassKey(ctx context.Context, k admissionpass.StoredKey, claim string) (bool, error) {
	cond := slotClaimID.Equal(expression.Value(claim)).And(expression.AttributeNotExists(slotKeyID))
	upd := expression.Set(slotKeyID, expression.Value(k.KeyID)).
		Set(expression.Name("public"), expression.Value(k.Public)).
		Set(expression.Name("wrapped"), expression.Value(k.Wrapped)).
		Set(expression.Name("createdMs"), expression.Value(pace.UnixMs(k.Created)))
	if !k.Revoked.IsZero() {
		upd = upd.Set(slotRevokedMs, expression.Value(pace.UnixMs(k.Revoked)))
	}
	if !k.Expires.IsZero() {
		upd = upd.Set(expression.Name("ttl"), expression.Value(ttlSeconds(k.Expires)))
	}
	w, err := s.update(ctx, passKeyKey(k.SignFrom), cond, upd, types.ReturnValueNone)
	if err != nil || w.ok {
		return w.ok, opErr(err, "put pass key %s", passKeySK(k.SignFrom))
	}
	kid, _ := w.old["keyId"].(*types.AttributeValueMemberS)
	return kid != nil && kid.Value == k.KeyID, nil
}

// RevokePassKey implements admissionpass.KeyStore: a query finds the kid's
// slot, then one UpdateItem sets revokedMs unless set.
func (s *Store) RevokePassKey(ctx context.Context, kid string, at time.Time) (admissionpass.StoredKey, error) {
	items, err := s.passKeyItems(ctx)
	if err != nil {
		return admissionpass.StoredKey{}, fmt.Errorf("dynamostore: revoke pass key %s: %w", kid, err)
	}
	i := slices.IndexFunc(items, func(it passKeyItem) bool { return it.KeyID == kid })
	if i < 0 {
		return admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound
	}
	w, err := s.update(ctx, itemKey(passKeysPK, items[i].SK), slotKeyID.Equal(expression.Value(kid)),
		expression.Set(slotRevokedMs, slotRevokedMs.IfNotExists(expression.Value(pace.UnixMs(at)))), types.ReturnValueAllNew)
	if err == nil && !w.ok {
		return admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound // gone since the query (TTL)
	}
	it, err := decoded("revoke pass key "+kid, unmarshal[passKeyItem], w.item, err)
	if err != nil {
		return admissionpass.StoredKey{}, err
	}
	k, err := it.key()
	return k, opErr(err, "revoke pass key %s", kid)
}
