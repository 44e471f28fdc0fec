package qrsvg

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkHandoffCPU: what drawing a handoff's QR code costs, beside what
// an admission already costs the queue function: an ES256 signature.
func BenchmarkHandoffCPU(b *testing.B) {
	url := "https://queue.example.com/waiting-room/gala-2026#handoff=K7QM3XWD9P2HRT5A"
	b.Run("qr code", func(b *testing.B) {
		for b.Loop() {
			if _, err := SVG(url); err != nil {
				b.Fatal(err)
			}
		}
	})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	digest := sha256.Sum256([]byte(url))
	b.Run("pass signature", func(b *testing.B) {
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
