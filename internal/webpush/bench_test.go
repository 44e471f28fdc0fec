package webpush

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkPushCPU: what a push costs the sender's CPU, beside what an
// admission already costs the queue function: an ES256 signature (its pass).
func BenchmarkPushCPU(b *testing.B) {
	ua, _ := ecdh.P256().GenerateKey(rand.Reader)
	sub := Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/x", P256DH: ua.PublicKey().Bytes(), Auth: make([]byte, 16)}
	payload := []byte(`{"program":"Gala night","stage":"turn"}`)
	b.Run("encrypt", func(b *testing.B) {
		for b.Loop() {
			if _, err := Encrypt(sub, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	digest := sha256.Sum256(payload)
	b.Run("pass signature", func(b *testing.B) {
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
