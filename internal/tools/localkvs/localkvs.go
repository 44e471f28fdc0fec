// Package localkvs emulates the data plane of one CloudFront KeyValueStore
// (cloudfront-keyvaluestore, REST-JSON) in memory, for the local server and
// the tests: no AWS account serves it here and moto does not implement it.
package localkvs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/example/waitingroom/internal/edgekv"
)

// The service's limits: a key of 1 to MaxKeyBytes bytes and a value of at most
// MaxValueBytes (else ValidationException), a store of at most MaxTotalBytes of
// keys and values (else ServiceQuotaExceededException).
const (
	MaxKeyBytes   = edgekv.MaxKeyBytes
	MaxValueBytes = edgekv.MaxValueBytes
	MaxTotalBytes = 5 << 20
)

// DefaultARN is an ARN of the form the data plane accepts, for the local server.
const DefaultARN = "arn:aws:cloudfront::123456789012:key-value-store/6f8e3b2a-0c1d-4e5f-9a7b-1c2d3e4f5a6b"

// sigV4A is the scheme of the Authorization header the SDK sends (SigV4A, ECDSA P-256).
const sigV4A = "AWS4-ECDSA-P256-SHA256"

// Server is one KeyValueStore's data plane as an http.Handler; it checks that
// requests are SigV4A-signed but not their signatures. Its methods are safe for concurrent use.
type Server struct {
	arn      string
	mu       sync.Mutex
	items    map[string]string
	size     int            // bytes of keys and values
	etagBase string         // random per Server, so that two stores never share an ETag
	version  int64          // bumped by every change
	failPut  func(int) bool // the test hook of FailPuts
	puts     int            // PutKey requests since FailPuts
	calls    map[string]int // by operation
}

// New returns an empty store named kvsARN (DefaultARN if empty).
func New(kvsARN string) *Server {
	if kvsARN == "" {
		kvsARN = DefaultARN
	}
	return &Server{arn: kvsARN, items: map[string]string{}, etagBase: "KV" + rand.Text()[:8], calls: map[string]int{}}
}

// ARN returns the store's ARN.
func (s *Server) ARN() string { return s.arn }

// ETag returns the store's current ETag, which every change replaces.
func (s *Server) ETag() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.etag()
}

func (s *Server) etag() string { return s.etagBase + strconv.FormatInt(s.version, 36) }

// Get returns the value of key, as the edge function runtime reads it in process.
func (s *Server) Get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.items[key]
	return v, ok
}

// Reader is s read in process, as edgekv.Store's Get (and so cfjs.KVS)
// reads: what the local edge function reads.
type Reader struct{ s *Server }

// Reader returns s's in-process reader.
func (s *Server) Reader() Reader { return Reader{s} }

// Get returns the value of key, or edgekv.ErrNotFound.
func (r Reader) Get(_ context.Context, key string) (string, error) {
	if v, ok := r.s.Get(key); ok {
		return v, nil
	}
	return "", fmt.Errorf("%w: %q", edgekv.ErrNotFound, key)
}

// Set puts key and value as a write through the API would, without its limits or ETag check.
func (s *Server) Set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(key, value)
}

func (s *Server) set(key, value string) {
	if old, ok := s.items[key]; ok {
		s.size -= len(key) + len(old)
	}
	s.items[key] = value
	s.size += len(key) + len(value)
	s.version++
}

// FailPuts makes the n-th PutKey request from now (1-based) for which rule
// returns true meet a concurrent write: the ETag changes and the put fails with
// ConflictException. A nil rule ends it.
func (s *Server) FailPuts(rule func(n int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPut, s.puts = rule, 0
}

// FailPut is FailPuts for the n-th PutKey request from now only.
func (s *Server) FailPut(n int) { s.FailPuts(func(i int) bool { return i == n }) }

// Calls returns how many requests for the operation op (such as "PutKey") the store received, refused ones included.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// apiError is an error answer of the REST-JSON protocol, status and code as the API model has them.
type apiError struct {
	status    int
	code, msg string
}

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status, code, "localkvs: " + fmt.Sprintf(format, args...)}
}

// ServeHTTP answers DescribeKeyValueStore, GetKey and PutKey, what internal/edgekv
// calls, and refuses anything else with UnknownOperationException.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	s.mu.Lock()
	etag, out, err := s.serve(r, body)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.Header().Set("X-Amzn-ErrorType", err.code)
		w.WriteHeader(err.status)
		out = map[string]string{"Message": err.msg}
	} else if etag != "" {
		w.Header().Set("ETag", etag)
	}
	_ = json.NewEncoder(w).Encode(out)
}

type counts struct{ ItemCount, TotalSizeInBytes int }

func (s *Server) counts() counts { return counts{len(s.items), s.size} }

// operations names the operation of a path of n segments and a method, "nMETHOD".
var operations = map[string]string{"2GET": "DescribeKeyValueStore", "4GET": "GetKey", "4PUT": "PutKey"}

// serve answers r with an ETag header ("" for none) and a body, or an error. It
// routes by the escaped path: the SDK escapes the ARN's and the key's slashes (%2F).
func (s *Server) serve(r *http.Request, body []byte) (string, any, *apiError) {
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	op := operations[fmt.Sprint(len(segs), r.Method)]
	if segs[0] != "key-value-stores" || len(segs) == 4 && segs[2] != "keys" || op == "" {
		return "", nil, fail(http.StatusNotFound, "UnknownOperationException", "no operation at %s %s", r.Method, r.URL.EscapedPath())
	}
	s.calls[op]++
	if !strings.HasPrefix(r.Header.Get("Authorization"), sigV4A+" ") {
		return "", nil, fail(http.StatusForbidden, "AccessDeniedException", "the request is not signed with SigV4A (%s)", sigV4A)
	}
	// A malformed escape unescapes to "", which names no store and no valid key.
	arn, _ := url.PathUnescape(segs[1])
	key, _ := url.PathUnescape(segs[len(segs)-1])
	switch {
	case arn != s.arn:
		return "", nil, fail(http.StatusNotFound, "ResourceNotFoundException", "no key value store %q", arn)
	case op == "DescribeKeyValueStore":
		return s.etag(), struct {
			counts
			KvsARN, Status string
		}{s.counts(), s.arn, "READY"}, nil
	case op == "PutKey":
		return s.put(r, key, body)
	}
	v, ok := s.items[key]
	if !ok {
		return "", nil, fail(http.StatusNotFound, "ResourceNotFoundException", "no key %q", key)
	}
	return "", struct {
		Key, Value string
		counts
	}{key, v, s.counts()}, nil
}

// put answers PutKey: checks its limits, then its If-Match against the ETag,
// after the concurrent write FailPuts may make, then the store's quota.
func (s *Server) put(r *http.Request, key string, body []byte) (string, any, *apiError) {
	s.puts++
	var in struct{ Value *string }
	if json.Unmarshal(body, &in) != nil || in.Value == nil {
		return "", nil, fail(http.StatusBadRequest, "ValidationException", "PutKey takes {\"Value\": string}")
	}
	value := *in.Value
	if len(key) == 0 || len(key) > MaxKeyBytes || len(value) > MaxValueBytes {
		return "", nil, fail(http.StatusBadRequest, "ValidationException", "key of %d bytes (1 to %d) or value of %d (at most %d)",
			len(key), MaxKeyBytes, len(value), MaxValueBytes)
	}
	if s.failPut != nil && s.failPut(s.puts) {
		s.version++ // another writer's change
	}
	size := s.size + len(key) + len(value)
	if old, ok := s.items[key]; ok {
		size -= len(key) + len(old)
	}
	if m := r.Header.Get("If-Match"); m != s.etag() {
		return "", nil, fail(http.StatusConflict, "ConflictException", "If-Match %q is not the store's ETag", m)
	}
	if size > MaxTotalBytes {
		return "", nil, fail(http.StatusPaymentRequired, "ServiceQuotaExceededException", "the store would hold %d bytes, over %d", size, MaxTotalBytes)
	}
	s.set(key, value)
	return s.etag(), s.counts(), nil
}
