package admissionpass_test

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/testing/kmstest"
)

// BenchmarkIssue is one pass signed by each kind of issuer (issue 22): a
// fixed key in memory (the baseline), a keyring over a memstore whose keys
// this process wraps (the local server's default), the same keyring with
// keys KMS makes and opens (moto behind kmstest's proxy). kms-calls/op is
// what the proxy received over the loop. (The Before, a kms:Sign per pass,
// was its key=kms-sign case until PASS_KMS_KEY_ID was retired.)
func BenchmarkIssue(b *testing.B) {
	a := passAdmission(1, time.Now())
	bench := func(b *testing.B, iss *admissionpass.Issuer, proxy *kmstest.Proxy) {
		if _, err := iss.Issue(b.Context(), a); err != nil { // the first key, made outside the loop
			b.Fatal(err)
		}
		var calls0 int64
		if proxy != nil {
			calls0 = proxy.Total()
		}
		for b.Loop() {
			if _, err := iss.Issue(b.Context(), a); err != nil {
				b.Fatal(err)
			}
		}
		if proxy != nil {
			b.ReportMetric(float64(proxy.Total()-calls0)/float64(b.N), "kms-calls/op")
		}
	}
	b.Run("key=fixed", func(b *testing.B) {
		k, err := admissionpass.GenerateLocalKey()
		if err != nil {
			b.Fatal(err)
		}
		iss, err := admissionpass.NewIssuer(issuerURL, k)
		if err != nil {
			b.Fatal(err)
		}
		bench(b, iss, nil)
	})
	b.Run("key=keyring-local", func(b *testing.B) {
		w, err := admissionpass.NewLocalWrapper()
		if err != nil {
			b.Fatal(err)
		}
		bench(b, admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(memstore.New(), w)), nil)
	})
	b.Run("key=keyring-kms", func(b *testing.B) {
		proxy := kmstest.NewProxy(b)
		client := kmstest.ClientFor(b, proxy.URL())
		w := admissionpass.NewKMSWrapper(client, kmstest.NewWrapKey(b, client))
		bench(b, admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(memstore.New(), w)), proxy)
	})
}
