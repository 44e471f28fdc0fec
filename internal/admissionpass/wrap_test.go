package admissionpass_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/kmstest"
)

// pkcs8 is priv's PKCS#8 encoding, to compare keys with cmp.
func pkcs8(t *testing.T, priv *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestLocalWrapper: a LocalWrapper unwraps what it wrapped under the same
// encryption context, and nothing else.
func TestLocalWrapper(t *testing.T) {
	w, err := admissionpass.NewLocalWrapper()
	if err != nil {
		t.Fatal(err)
	}
	other, err := admissionpass.NewLocalWrapper()
	if err != nil {
		t.Fatal(err)
	}
	encCtx := map[string]string{"keyring": "passes", "slot": "2026-05-19T10:00:00Z"}
	tests := []struct {
		name    string
		unwrap  admissionpass.KeyWrapper
		encCtx  map[string]string
		tamper  func([]byte) []byte
		wantErr bool
	}{
		{name: "round trip", unwrap: w, encCtx: map[string]string{"slot": "2026-05-19T10:00:00Z", "keyring": "passes"}},
		{name: "other value", unwrap: w, encCtx: map[string]string{"keyring": "passes", "slot": "2026-05-19T11:00:00Z"}, wantErr: true},
		{name: "pair missing", unwrap: w, encCtx: map[string]string{"keyring": "passes"}, wantErr: true},
		{name: "no context", unwrap: w, wantErr: true},
		// Without lengths, keyring+passes and keyringp+asses would encode alike.
		{name: "boundary moved", unwrap: w, encCtx: map[string]string{"keyringp": "asses", "slot": "2026-05-19T10:00:00Z"}, wantErr: true},
		{name: "tampered", unwrap: w, encCtx: encCtx, tamper: func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, wantErr: true},
		{name: "truncated", unwrap: w, encCtx: encCtx, tamper: func(b []byte) []byte { return b[:len(b)-1] }, wantErr: true},
		{name: "empty", unwrap: w, encCtx: encCtx, tamper: func([]byte) []byte { return nil }, wantErr: true},
		{name: "other wrapper", unwrap: other, encCtx: encCtx, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			priv, wrapped, err := w.NewKeyPair(t.Context(), encCtx)
			if err != nil {
				t.Fatalf("NewKeyPair: %v", err)
			}
			if priv.Curve != elliptic.P256() {
				t.Fatalf("NewKeyPair made a key on %s, want P-256", priv.Curve.Params().Name)
			}
			if tt.tamper != nil {
				wrapped = tt.tamper(wrapped)
			}
			got, err := tt.unwrap.Unwrap(t.Context(), wrapped, tt.encCtx)
			if tt.wantErr {
				if err == nil {
					t.Fatal("Unwrap succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Unwrap: %v", err)
			}
			if diff := cmp.Diff(pkcs8(t, priv), pkcs8(t, got)); diff != "" {
				t.Errorf("unwrapped key (-made +unwrapped):\n%s", diff)
			}
		})
	}
}

// fakeWrapKMS answers GenerateDataKeyPair and Decrypt with its fields and
// keeps the inputs.
type fakeWrapKMS struct {
	genOut *kms.GenerateDataKeyPairOutput
	decOut *kms.DecryptOutput
	genIn  *kms.GenerateDataKeyPairInput
	decIn  *kms.DecryptInput
}

func (f *fakeWrapKMS) GenerateDataKeyPair(_ context.Context, in *kms.GenerateDataKeyPairInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyPairOutput, error) {
	f.genIn = in
	if f.genOut == nil {
		return nil, errors.New("no answer")
	}
	return f.genOut, nil
}

func (f *fakeWrapKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.decIn = in
	if f.decOut == nil {
		return nil, errors.New("no answer")
	}
	return f.decOut, nil
}

// keyPairDER returns a new key on curve as PKCS#8 and its public half as
// PKIX.
func keyPairDER(t *testing.T, curve elliptic.Curve) (priv, pub []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err = x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pkcs8(t, k), pub
}

// TestKMSWrapperCalls: KMSWrapper asks KMS for a P-256 pair under its key
// and context, decrypts pinned to its key, zeroes the plaintext KMS
// answered, and refuses keys that are not P-256 or do not match.
func TestKMSWrapperCalls(t *testing.T) {
	encCtx := map[string]string{"keyring": "passes"}
	blob := []byte("wrapped")
	privDER, pubDER := keyPairDER(t, elliptic.P256())
	_, otherPubDER := keyPairDER(t, elliptic.P256())
	p384DER, p384PubDER := keyPairDER(t, elliptic.P384())
	clone := func(b []byte) []byte { return append([]byte(nil), b...) }
	ignore := cmpopts.IgnoreUnexported(kms.GenerateDataKeyPairInput{}, kms.DecryptInput{})

	t.Run("NewKeyPair", func(t *testing.T) {
		plain := clone(privDER)
		f := &fakeWrapKMS{genOut: &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: plain, PublicKey: pubDER, PrivateKeyCiphertextBlob: blob}}
		priv, wrapped, err := admissionpass.NewKMSWrapper(f, "alias/wrap").NewKeyPair(t.Context(), encCtx)
		if err != nil {
			t.Fatal(err)
		}
		wantIn := &kms.GenerateDataKeyPairInput{KeyId: aws.String("alias/wrap"), KeyPairSpec: types.DataKeyPairSpecEccNistP256, EncryptionContext: encCtx}
		if diff := cmp.Diff(wantIn, f.genIn, ignore); diff != "" {
			t.Errorf("GenerateDataKeyPair input (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(privDER, pkcs8(t, priv)); diff != "" {
			t.Errorf("key (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(blob, wrapped); diff != "" {
			t.Errorf("wrapped (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(make([]byte, len(plain)), plain); diff != "" {
			t.Errorf("PrivateKeyPlaintext not zeroed (-want +got):\n%s", diff)
		}
	})
	t.Run("Unwrap", func(t *testing.T) {
		plain := clone(privDER)
		f := &fakeWrapKMS{decOut: &kms.DecryptOutput{Plaintext: plain}}
		priv, err := admissionpass.NewKMSWrapper(f, "alias/wrap").Unwrap(t.Context(), blob, encCtx)
		if err != nil {
			t.Fatal(err)
		}
		wantIn := &kms.DecryptInput{KeyId: aws.String("alias/wrap"), CiphertextBlob: blob, EncryptionContext: encCtx}
		if diff := cmp.Diff(wantIn, f.decIn, ignore); diff != "" {
			t.Errorf("Decrypt input (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(privDER, pkcs8(t, priv)); diff != "" {
			t.Errorf("key (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(make([]byte, len(plain)), plain); diff != "" {
			t.Errorf("Plaintext not zeroed (-want +got):\n%s", diff)
		}
	})

	refusals := []struct {
		name    string
		genOut  *kms.GenerateDataKeyPairOutput
		decOut  *kms.DecryptOutput
		wantErr string
	}{
		{"KMS fails", nil, nil, "no answer"},
		{"P-384", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: p384DER, PublicKey: p384PubDER, PrivateKeyCiphertextBlob: blob},
			&kms.DecryptOutput{Plaintext: p384DER}, "want P-256"},
		{"not PKCS#8", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: []byte("junk"), PublicKey: pubDER, PrivateKeyCiphertextBlob: blob},
			&kms.DecryptOutput{Plaintext: []byte("junk")}, "not a PKCS#8"},
		{"other public key", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: privDER, PublicKey: otherPubDER, PrivateKeyCiphertextBlob: blob},
			nil, "does not match"},
		{"no blob", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: privDER, PublicKey: pubDER},
			nil, "no wrapped private key"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if tt.genOut != nil {
				tt.genOut.PrivateKeyPlaintext = clone(tt.genOut.PrivateKeyPlaintext)
			}
			w := admissionpass.NewKMSWrapper(&fakeWrapKMS{genOut: tt.genOut}, "alias/wrap")
			if _, _, err := w.NewKeyPair(t.Context(), encCtx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewKeyPair: got %v, want an error saying %q", err, tt.wantErr)
			}
			if tt.decOut == nil && tt.genOut != nil { // a fault of GenerateDataKeyPair's answer only
				return
			}
			if tt.decOut != nil {
				tt.decOut.Plaintext = clone(tt.decOut.Plaintext)
			}
			w = admissionpass.NewKMSWrapper(&fakeWrapKMS{decOut: tt.decOut}, "alias/wrap")
			if _, err := w.Unwrap(t.Context(), blob, encCtx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Unwrap: got %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestKMSWrapperOnMoto wraps and unwraps a key with KMS on moto_server,
// GenerateDataKeyPair answered by kmstest's shim: the key comes back under
// the same context and key only, for one call of each operation.
func TestKMSWrapperOnMoto(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	otherKeyID := kmstest.NewWrapKey(t, client)
	w := admissionpass.NewKMSWrapper(client, keyID)
	encCtx := map[string]string{"keyring": "passes", "slot": "2026-05-19T10:00:00Z"}

	priv, wrapped, err := w.NewKeyPair(t.Context(), encCtx)
	if err != nil {
		t.Fatalf("NewKeyPair: %v", err)
	}
	got, err := w.Unwrap(t.Context(), wrapped, encCtx)
	if err != nil {
		t.Fatalf("Unwrap: %v", err)
	}
	if diff := cmp.Diff(pkcs8(t, priv), pkcs8(t, got)); diff != "" {
		t.Errorf("unwrapped key (-made +unwrapped):\n%s", diff)
	}
	calls := map[string]int64{"GenerateDataKeyPair": proxy.Calls("GenerateDataKeyPair"), "Decrypt": proxy.Calls("Decrypt")}
	if diff := cmp.Diff(map[string]int64{"GenerateDataKeyPair": 1, "Decrypt": 1}, calls); diff != "" {
		t.Errorf("KMS calls for a wrap and an unwrap (-want +got):\n%s", diff)
	}

	if _, err := w.Unwrap(t.Context(), wrapped, map[string]string{"keyring": "passes", "slot": "2026-05-19T11:00:00Z"}); err == nil {
		t.Error("Unwrap under another encryption context succeeded")
	}
	if _, err := admissionpass.NewKMSWrapper(client, otherKeyID).Unwrap(t.Context(), wrapped, encCtx); err == nil {
		t.Error("Unwrap pinned to another KMS key succeeded")
	}
}
