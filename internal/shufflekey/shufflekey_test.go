package shufflekey_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/kmstest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestKMSKey: on moto's KMS, the template's RSA key signs deterministic
// PKCS #1 v1.5 signatures that its public half verifies, and a key of
// another spec (the pass key, ECC P-256) is refused.
func TestKMSKey(t *testing.T) {
	client := kmstest.Client(t)
	key := shufflekey.NewKMSKey(client, kmstest.NewShuffleKey(t, client))
	pub, err := key.PublicKey(t.Context())
	if err != nil {
		t.Fatalf("PublicKey: %v", err)
	}
	msg := []byte("waitingroom/shuffle/v2 gala nonce")
	sig, err := key.SignPKCS1v15(t.Context(), msg)
	if err != nil {
		t.Fatalf("SignPKCS1v15: %v", err)
	}
	sum := sha256.Sum256(msg)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("the signature does not verify with the public half: %v", err)
	}
	again, err := key.SignPKCS1v15(t.Context(), msg)
	if err != nil || string(again) != string(sig) {
		t.Errorf("a second signature of the same message differs (err %v): the seed would not be unique", err)
	}

	ec := shufflekey.NewKMSKey(client, kmstest.NewSigningKey(t, client))
	if _, err := ec.PublicKey(t.Context()); err == nil || !strings.Contains(err.Error(), "KeySpec") {
		t.Errorf("PublicKey of an ECC key: %v, want a KeySpec refusal", err)
	}
}
