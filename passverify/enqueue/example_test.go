package enqueue_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/example/waitingroom/passverify/enqueue"
)

// A site serves its JWKS at the program's enqueueJwksUrl and gives each
// signed-in visitor a short-lived token, which the waiting page sends as the
// X-Enqueue-Token header when the visitor enters the queue.
func Example() {
	// In production the key comes from the site's secret store, and the
	// previous key stays in the JWKS for a while after a rotation.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	const kid = "2026-05"
	jwks, err := enqueue.JWKS(map[string]crypto.PublicKey{kid: key.Public()})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/enqueue-jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(jwks)
	})
	mux.HandleFunc("GET /enqueue-token", func(w http.ResponseWriter, r *http.Request) {
		account := "customer-8812" // the signed-in visitor, from the site's session
		token, err := enqueue.Sign(key, kid, "https://shop.example.com", "gala", account, 5*time.Minute)
		if err != nil {
			http.Error(w, "no token", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(token))
	})

	// What the waiting room and the page see.
	get := func(path string) string {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Body.String()
	}
	var set struct {
		Keys []struct{ Kid, Kty, Crv, Alg, Use string }
	}
	_ = json.Unmarshal([]byte(get("/.well-known/enqueue-jwks.json")), &set)
	fmt.Printf("JWKS: %+v\n", set.Keys)
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(get("/enqueue-token"), ".")[0])
	fmt.Printf("token header: %s\n", header)
	// Output:
	// JWKS: [{Kid:2026-05 Kty:EC Crv:P-256 Alg:ES256 Use:sig}]
	// token header: {"alg":"ES256","kid":"2026-05","typ":"JWT"}
}
