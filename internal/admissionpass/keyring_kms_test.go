package admissionpass_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/testing/kmstest"
)

// countingKMS is one instance's KMS client, counting the keys it makes
// and opens by slot (the encryption context's signFrom).
type countingKMS struct {
	admissionpass.KMSWrapAPI
	mu           sync.Mutex
	made, opened map[string]int
}

func (c *countingKMS) GenerateDataKeyPair(ctx context.Context, in *kms.GenerateDataKeyPairInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyPairOutput, error) {
	c.mu.Lock()
	c.made[in.EncryptionContext["signFrom"]]++
	c.mu.Unlock()
	return c.KMSWrapAPI.GenerateDataKeyPair(ctx, in, optFns...)
}

func (c *countingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.mu.Lock()
	c.opened[in.EncryptionContext["signFrom"]]++
	c.mu.Unlock()
	return c.KMSWrapAPI.Decrypt(ctx, in, optFns...)
}

// kmsInstance is one function instance: its keyring over the shared store,
// wrapped by the KMS key through its own counting client, and its issuer.
type kmsInstance struct {
	kms *countingKMS
	iss *admissionpass.Issuer
}

func newKMSInstances(n int, store admissionpass.KeyStore, client admissionpass.KMSWrapAPI, keyID string, opts ...admissionpass.KeyringOption) []kmsInstance {
	out := make([]kmsInstance, n)
	for i := range out {
		c := &countingKMS{KMSWrapAPI: client, made: map[string]int{}, opened: map[string]int{}}
		ring := admissionpass.NewKeyring(store, admissionpass.NewKMSWrapper(c, keyID), opts...)
		out[i] = kmsInstance{kms: c, iss: admissionpass.NewSetIssuer(issuerURL, ring)}
	}
	return out
}

// kmsCalls is the proxy's count of the wrapper's two operations.
func kmsCalls(p *kmstest.Proxy) (made, opened, total int64) {
	return p.Calls("GenerateDataKeyPair"), p.Calls("Decrypt"), p.Total()
}

// signedPass is a pass and the instant to verify it at.
type signedPass struct {
	pass string
	at   time.Time
}

// issueAt signs n passes on in at a.AdmittedAt, with 4 goroutines.
func issueAt(t *testing.T, in kmsInstance, n int, at time.Time) []signedPass {
	t.Helper()
	const signers = 4
	out := make([]signedPass, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for s := range signers {
		wg.Go(func() {
			for i := s; i < n; i += signers {
				pass, err := in.iss.Issue(context.Background(), passAdmission(int64(i+1), at))
				if err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("Issue: %v", err)
					}
					continue
				}
				out[i] = signedPass{pass: pass, at: at.Add(time.Second)}
			}
		})
	}
	wg.Wait()
	return out
}

// passAdmission is an admission of ticket at at, with a fresh token id
// and a window of 10 min.
func passAdmission(ticket int64, at time.Time) admissionpass.Admission {
	var id [16]byte
	_, _ = rand.Read(id[:])
	at = at.Truncate(time.Millisecond)
	return admissionpass.Admission{ProgramID: admission.ProgramID, TokenID: base64.RawURLEncoding.EncodeToString(id[:]),
		Ticket: ticket, AdmittedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
}

// verifyAllWithJWX verifies every pass with jwx against the JWKS document
// doc, each at its instant, across all cores. It returns how many passes
// each kid signed, and reports every failure (the first few) and every
// jti seen twice.
func verifyAllWithJWX(t *testing.T, doc []byte, passes []signedPass) map[string]int {
	t.Helper()
	set, err := jwk.Parse(doc)
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v\n%s", err, doc)
	}
	workers := runtime.GOMAXPROCS(0)
	kids := make([]map[string]int, workers)
	jtis := make([][]string, workers)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		kids[w] = map[string]int{}
		wg.Go(func() {
			for i := w; i < len(passes); i += workers {
				p := passes[i]
				tok, err := jwt.ParseString(p.pass, jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(issuerURL),
					jwt.WithAudience(admission.ProgramID), jwt.WithClock(jwt.ClockFunc(func() time.Time { return p.at })))
				var msg *jws.Message
				if err == nil {
					msg, err = jws.Parse([]byte(p.pass))
				}
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("jwx refuses pass %d: %v", i, err)
					}
					continue
				}
				kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
				jti, _ := tok.JwtID()
				kids[w][kid]++
				jtis[w] = append(jtis[w], jti)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("jwx refused %d of %d passes", n, len(passes))
	}
	out := map[string]int{}
	for _, k := range kids {
		for kid, n := range k {
			out[kid] += n
		}
	}
	seen := make(map[string]bool, len(passes))
	for _, js := range jtis {
		for _, j := range js {
			if seen[j] {
				t.Errorf("jti %s on two passes", j)
			}
			seen[j] = true
		}
	}
	return out
}

// TestKeyringKMSCallsAcrossInstances: four instances' issuers over one
// store sign thousands of passes, concurrently, across a rotation, with
// keys KMS makes and opens (moto behind kmstest's proxy). The KMS calls
// are exactly the keys made plus, for each key, the instances that opened
// it: each instance makes or opens each key once, whatever its signature
// count. Every pass verifies with jwx.
func TestKeyringKMSCallsAcrossInstances(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	store := memstore.New()
	slot := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) // a slot's start at a rotation of 1 h
	clk := clock.NewFake(slot)
	const n, perPhase = 4, 400
	ins := newKMSInstances(n, store, client, keyID, admissionpass.WithRotation(time.Hour), admissionpass.WithKeyringClock(clk))
	made0, opened0, total0 := kmsCalls(proxy)

	// 10 min into the slot (its key made on demand); 15 min before the
	// next (the lead: the next key is made and published a whole lead
	// before it signs); 1 min into the next (it signs). In each phase one
	// instance signs first, so that it makes the phase's new key (the race
	// to make one is TestKeyringFirstKeyOnce's), then all sign at once.
	var passes []signedPass
	for phase, at := range []time.Duration{10 * time.Minute, 45 * time.Minute, 61 * time.Minute} {
		setClock(clk, slot.Add(at))
		passes = append(passes, issueAt(t, ins[phase%n], 1, clk.Now())...)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, in := range ins {
			wg.Go(func() {
				ps := issueAt(t, in, perPhase, clk.Now())
				mu.Lock()
				passes = append(passes, ps...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	keys, err := store.PassKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("%d keys stored, want the two slots'", len(keys))
	}
	made, opened, total := kmsCalls(proxy)
	made, opened, total = made-made0, opened-opened0, total-total0
	var wantOpened int64
	for _, k := range keys {
		slotMs := fmt.Sprint(k.SignFrom.UnixMilli())
		makers := 0
		for i, in := range ins {
			m, o := in.kms.made[slotMs], in.kms.opened[slotMs]
			if m+o != 1 {
				t.Errorf("instance %d made key %s %d times and opened it %d times, want once in all", i, k.KeyID, m, o)
			}
			makers += m
			wantOpened += int64(o)
		}
		if makers != 1 {
			t.Errorf("key %s made by %d instances, want 1", k.KeyID, makers)
		}
	}
	if made != int64(len(keys)) || opened != wantOpened || total != made+opened {
		t.Errorf("KMS calls: %d GenerateDataKeyPair, %d Decrypt, %d in all; want %d (the keys made), %d (the instances that opened them), their sum",
			made, opened, total, len(keys), wantOpened)
	}
	if wantOpened != int64(len(keys)*(n-1)) {
		t.Errorf("%d openings, want every key opened by each instance but its maker (%d)", wantOpened, len(keys)*(n-1))
	}
	t.Logf("%d passes on %d instances: %d GenerateDataKeyPair, %d Decrypt", len(passes), n, made, opened)

	doc, err := ins[0].iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kids := verifyAllWithJWX(t, doc, passes)
	// Both slots signed before the second key did: 2 × (n × perPhase + 1);
	// the second, n × perPhase + 1.
	want := map[string]int{keys[0].KeyID: 2 * (n*perPhase + 1), keys[1].KeyID: n*perPhase + 1}
	if !mapsEqual(kids, want) {
		t.Errorf("passes by kid %v, want %v", kids, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

var (
	signRate      = flag.Float64("sign.rate", 1000, "TestKeyringSigningRate: signatures a second across the instances")
	signFor       = flag.Duration("sign.for", 0, "TestKeyringSigningRate: how long to sign at -sign.rate, on the real clock; 0: -sign.rate passes as fast as they go, on a clock fixed mid-slot")
	signInstances = flag.Int("sign.instances", 4, "TestKeyringSigningRate: keyrings standing for function instances, over one store")
	signOut       = flag.String("sign.out", "", "TestKeyringSigningRate: write the summary as JSON to this file")
)

// signSummary is what TestKeyringSigningRate measured.
type signSummary struct {
	Instances      int              `json:"instances"`
	TargetPerSec   float64          `json:"targetPerSecond"`
	Seconds        float64          `json:"seconds"`
	Signed         int              `json:"signed"`
	Failed         int64            `json:"failed"`
	Verified       int              `json:"verified"`
	Kids           map[string]int   `json:"kids"`
	AchievedPerSec float64          `json:"achievedPerSecond"`
	PerSecond      []int64          `json:"perSecond"`
	LateP50Ms      float64          `json:"lateP50Ms"`
	LateP99Ms      float64          `json:"lateP99Ms"`
	LateMaxMs      float64          `json:"lateMaxMs"`
	KMS            map[string]int64 `json:"kms"`
	PerInstance    []map[string]int `json:"perInstance"`
	CPUPerSignUs   float64          `json:"cpuPerSignatureUs"`
	Load1          string           `json:"load1"`
}

// TestKeyringSigningRate is the signing path of issue 22's measurement
// alone (docs/benchmarks.md): -sign.instances keyrings over one memstore,
// their keys made and opened by KMS (moto behind kmstest's proxy, which
// counts the calls), sign -sign.rate passes a second for -sign.for, paced
// to a schedule on the real clock; then jwx verifies every pass. By
// default (make test) -sign.rate passes are signed as fast as they go on a
// keyring clock fixed mid-slot, and the test checks the KMS calls and the
// passes, never a rate; the measurement:
//
//	go test ./internal/admissionpass -run TestKeyringSigningRate -v -timeout 30m -args -sign.rate 10000 -sign.for 60s -sign.instances 4
func TestKeyringSigningRate(t *testing.T) {
	if *signRate <= 0 || *signFor < 0 {
		t.Fatal("-sign.rate must be above 0 and -sign.for not below")
	}
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	store := memstore.New()
	paced := *signFor > 0
	var clk clock.Clock = clock.Real{}
	if !paced {
		clk = clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)) // mid-slot: one key signs
	}
	ins := newKMSInstances(*signInstances, store, client, keyID, admissionpass.WithKeyringClock(clk))
	if !paced {
		// One instance makes the key before all sign (the race to make it
		// is TestKeyringFirstKeyOnce's).
		if _, err := ins[0].iss.KeyID(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]int64{}
	ops := []string{"GenerateDataKeyPair", "Decrypt", "Encrypt", "Sign", "GetPublicKey", "CreateKey", "ListKeys"}
	for _, op := range ops {
		before[op] = proxy.Calls(op)
	}
	total0 := proxy.Total()

	total := int(*signRate)
	every := time.Duration(0)
	if paced {
		total, every = int(*signRate*signFor.Seconds()), time.Duration(float64(time.Second) / *signRate)
	}
	passes := make([]signedPass, total)
	late := make([]time.Duration, total)
	done := make([]time.Duration, total) // completion, from the start
	// A hang guard: the run stops at three times its length.
	ctx, cancel := context.WithTimeout(t.Context(), 3**signFor+time.Minute)
	defer cancel()
	var failed atomic.Int64
	var next atomic.Int64
	workers := 2 * len(ins)
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		in := ins[w%len(ins)]
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				due := start.Add(time.Duration(i) * every)
				if d := time.Until(due); d > 0 {
					time.Sleep(d) // the measurement's schedule (-sign.for), not a product delay
				}
				now := clk.Now()
				pass, err := in.iss.Issue(ctx, passAdmission(int64(i+1), now))
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("Issue: %v", err)
					}
					continue
				}
				end := time.Now()
				passes[i] = signedPass{pass: pass, at: now.Add(time.Second)}
				late[i], done[i] = end.Sub(due), end.Sub(start)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err := ctx.Err(); err != nil {
		t.Fatalf("the signing did not end within its bound: %v", err)
	}

	s := signSummary{Instances: len(ins), TargetPerSec: *signRate, Seconds: elapsed.Seconds(), Signed: total - int(failed.Load()),
		Failed: failed.Load(), KMS: map[string]int64{}, Load1: loadAverage()}
	s.AchievedPerSec = float64(s.Signed) / elapsed.Seconds()
	s.CPUPerSignUs = float64(cpu.Microseconds()) / float64(max(1, s.Signed))
	s.PerSecond = make([]int64, int(elapsed/time.Second)+1)
	var lates []time.Duration
	for i := range total {
		if passes[i].pass == "" {
			continue
		}
		s.PerSecond[done[i]/time.Second]++
		lates = append(lates, late[i])
	}
	slices.Sort(lates)
	if n := len(lates); n > 0 {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		s.LateP50Ms, s.LateP99Ms, s.LateMaxMs = ms(lates[n/2]), ms(lates[min(n-1, n*99/100)]), ms(lates[n-1])
	}
	var known int64
	for _, op := range ops {
		if d := proxy.Calls(op) - before[op]; d > 0 {
			s.KMS[op] = d
			known += d
		}
	}
	if other := proxy.Total() - total0 - known; other > 0 {
		s.KMS["other"] = other
	}
	for _, in := range ins {
		in.kms.mu.Lock()
		s.PerInstance = append(s.PerInstance, map[string]int{"made": sum(in.kms.made), "opened": sum(in.kms.opened)})
		in.kms.mu.Unlock()
	}
	signed := slices.DeleteFunc(passes, func(p signedPass) bool { return p.pass == "" })
	doc, err := ins[0].iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	verifyStart := time.Now()
	s.Kids = verifyAllWithJWX(t, doc, signed)
	for _, n := range s.Kids {
		s.Verified += n
	}
	t.Logf("jwx verified %d passes in %s on %d cores", s.Verified, time.Since(verifyStart).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	js, _ := json.MarshalIndent(s, "", "  ")
	line, _ := json.Marshal(s)
	t.Logf("%s", line)
	if *signOut != "" {
		if err := os.WriteFile(*signOut, append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// At most one KMS call per instance per rotation (24 h here): the first
	// key, made by one and opened by the others; a second key only when a
	// paced run crosses into the next slot's lead. Mid-slot, exactly one.
	for i, c := range s.PerInstance {
		if n := c["made"] + c["opened"]; n > 2 || !paced && n != 1 {
			t.Errorf("instance %d: %v KMS calls, want one a key", i, c)
		}
	}
	if s.Verified != s.Signed || s.Failed != 0 {
		t.Errorf("%d signed, %d failed, %d verified: want every pass signed and verified", s.Signed, s.Failed, s.Verified)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's load average over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	var l1 string
	_, _ = fmt.Sscan(string(b), &l1)
	return l1
}
