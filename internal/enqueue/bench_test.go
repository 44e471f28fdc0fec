package enqueue_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/testing/enqueuetest"
)

// BenchmarkAccountCPU: what checking an enter's enqueue token costs (its
// site's keys cached), beside an admission's ES256 signature.
func BenchmarkAccountCPU(b *testing.B) {
	site := enqueuetest.New(b)
	v := enqueue.NewVerifier(site.Client, nil)
	tok := site.Token(b, "gala", "alice")
	b.Run("enqueue token", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Verify(b.Context(), site.JWKSURL, enqueuetest.Issuer, "gala", tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	digest := sha256.Sum256([]byte(tok))
	b.Run("pass signature", func(b *testing.B) {
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
