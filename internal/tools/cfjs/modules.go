package cfjs

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"

	"github.com/dop251/goja"

	"github.com/example/waitingroom/internal/edgekv"
)

// ErrNotFound is the error of a KVS Get for a key the store does not hold:
// edgekv's, so that an edgekv.Store is a KVS.
var ErrNotFound = edgekv.ErrNotFound

// KVS is the key value store associated with a function. Get returns
// ErrNotFound (possibly wrapped) for a missing key; any other error is a
// failure of the store.
type KVS interface {
	Get(ctx context.Context, key string) (string, error)
}

// Map is an in-memory KVS, safe for concurrent use; its zero value is empty.
type Map struct{ values, fails sync.Map }

// Set stores value under key.
func (m *Map) Set(key, value string) { m.values.Store(key, value) }

// Delete removes key.
func (m *Map) Delete(key string) { m.values.Delete(key) }

// Fail makes every Get of key return err from now on; a nil err ends that.
func (m *Map) Fail(key string, err error) { m.fails.Store(key, err) }

// Get returns the value of key, ErrNotFound, or the failure set with Fail.
func (m *Map) Get(_ context.Context, key string) (string, error) {
	if f, _ := m.fails.Load(key); f != nil {
		return "", f.(error)
	}
	v, ok := m.values.Load(key)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return v.(string), nil
}

// read is the prelude's read of kvs: the value of a key, null for a missing
// one, or an error (thrown) for a failure of the store.
func read(ctx context.Context, r *goja.Runtime, kvs KVS) func(string) (goja.Value, error) {
	return func(key string) (goja.Value, error) {
		if kvs == nil {
			return nil, errors.New("no key value store is associated with the function")
		}
		v, err := kvs.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound):
			return goja.Null(), nil
		case err != nil:
			return nil, fmt.Errorf("key value store: %w", err)
		}
		return r.ToValue(v), nil
	}
}

var hashes = map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New}

// digest is the prelude's digest of data by alg (md5, sha1 or sha256), an HMAC
// under key unless key is null, in the encoding enc: hex, base64 or base64url.
func digest(alg string, key goja.Value, data, enc string) (string, error) {
	h := hashes[alg]()
	if !goja.IsNull(key) {
		h = hmac.New(hashes[alg], []byte(key.String()))
	}
	h.Write([]byte(data))
	switch sum := h.Sum(nil); enc {
	case "hex":
		return hex.EncodeToString(sum), nil
	case "base64":
		return base64.StdEncoding.EncodeToString(sum), nil
	case "base64url":
		return base64.RawURLEncoding.EncodeToString(sum), nil
	}
	return "", fmt.Errorf("crypto: digest encoding %q is not provided by cfjs (hex, base64, base64url)", enc)
}
