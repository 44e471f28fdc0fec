package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/notify"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/webpush"
)

// Push configures the App's Web Push (docs/design.md, "Your turn by push").
type Push struct {
	Subject string                   // the VAPID subject: mailto: or https:
	Hosts   webpush.Hosts            // the push services endpoints may name; nil: webpush.DefaultHosts
	Keys    notify.KeyStore          // keeps the VAPID key; nil: the App's store
	Wrap    admissionpass.KeyWrapper // makes and opens the VAPID key: the sender's alone
	HTTP    *http.Client             // sends the pushes; nil: one with a 10 s timeout
	Clock   clock.Clock              // the sender's; nil: the real clock
}

// WithPush lets waiting people subscribe to push, and the page offer it
// once the stack's VAPID key exists.
func WithPush(p Push) Option {
	return func(a *App) {
		if p.Hosts == nil {
			p.Hosts = webpush.DefaultHosts
		}
		a.push = &p
		a.serviceOpts = append(a.serviceOpts, queue.WithPush(p.Hosts))
	}
}

// pushKeyRecheck is how long a page's VAPID key is kept before it is read
// again: a key rotated (its item deleted) reaches the pages within it.
const pushKeyRecheck = 5 * time.Minute

// pushKey reads the VAPID public key for the page, once a pushKeyRecheck.
type pushKey struct {
	ks      notify.KeyStore
	mu      sync.Mutex
	key     string
	checked time.Time
}

// get returns the key, "" while none is stored; a failed read keeps the last.
func (k *pushKey) get(ctx context.Context) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.checked) < pushKeyRecheck {
		return k.key
	}
	k.checked = time.Now()
	if key, err := notify.PublicKey(ctx, k.ks); err == nil {
		k.key = key
	}
	return k.key
}

// keyStore is the push's VAPID key store.
func (a *App) keyStore() (notify.KeyStore, error) {
	if a.push.Keys != nil {
		return a.push.Keys, nil
	}
	ks, ok := a.Store.(notify.KeyStore)
	if !ok {
		return nil, fmt.Errorf("app: the store %T keeps no VAPID key", a.Store)
	}
	return ks, nil
}

// Sender returns the push sender, opening (or making) the VAPID key.
func (a *App) Sender(ctx context.Context) (*notify.Sender, error) {
	if a.push == nil || a.push.Wrap == nil {
		return nil, fmt.Errorf("app: no push configured to send with")
	}
	ks, err := a.keyStore()
	if err != nil {
		return nil, err
	}
	st, ok := a.Store.(notify.Store)
	if !ok {
		return nil, fmt.Errorf("app: the store %T keeps no subscriptions", a.Store)
	}
	c := cmp.Or[clock.Clock](a.push.Clock, clock.Real{})
	key, err := notify.Key(ctx, ks, a.push.Wrap, c.Now())
	if err != nil {
		return nil, err
	}
	hc := a.push.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	client := &webpush.Client{HTTP: hc, VAPID: webpush.NewVAPID(key, a.push.Subject, time.Now), Hosts: a.push.Hosts}
	return notify.New(a.Service, st, client, c, a.Log), nil
}

// SenderFromEnv builds the push sender function's sender from getenv:
// FromEnv's App, whose VAPID key PASS_WRAP_KMS_KEY_ID wraps.
func SenderFromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*notify.Sender, error) {
	a, err := fromEnv(ctx, getenv, w, roleSender)
	if err != nil {
		return nil, err
	}
	switch {
	case a.push == nil:
		return nil, fmt.Errorf("config: %s is required: the sender signs its pushes for that contact", config.EnvPushSubject)
	case a.Config.Pass.WrapKMSKeyID == "":
		return nil, ErrNoPassKey
	}
	client, err := admissionpass.NewKMSClient(ctx, a.Config.Pass.KMSEndpoint)
	if err != nil {
		return nil, fmt.Errorf("KMS client: %w", err)
	}
	a.push.Wrap = admissionpass.NewKMSWrapper(client, a.Config.Pass.WrapKMSKeyID)
	return a.Sender(ctx)
}

// senderReserve is how long before its deadline a sender's run stops.
const senderReserve = 3 * time.Second

// StartSender is the push sender function's main: the sender built once
// per cold start (SenderFromEnv), each invocation a run of notify.RunFor.
func StartSender() {
	s, err := SenderFromEnv(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cold start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context) error {
		// No tick starts later than a lease before the deadline: a turn's
		// work may last that long.
		until := time.Now().Add(notify.RunFor)
		if d, ok := ctx.Deadline(); ok && d.Add(-senderReserve-notify.Lease).Before(until) {
			until = d.Add(-senderReserve - notify.Lease)
		}
		return s.Run(ctx, until)
	})
}
