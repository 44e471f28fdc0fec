// Package edge keeps the edge gate's KeyValueStore (functions/edgegate)
// in step with the programs: each program's mode and break-glass under
// p.<id>, the site's routes and bypass rules under site, and the HMAC keys
// under keys. The admin function writes it after each change; the store
// is the keys' only home (docs/edge-gate.md).
package edge

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/edgetoken"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// The KeyValueStore's keys.
const (
	KeysKey = "keys"
	SiteKey = "site"
)

// ProgramKey is the key of programID's entry.
func ProgramKey(programID string) string { return "p." + programID }

// Propagation is how long a new key is published before it signs: a
// KeyValueStore change reaches the edges in about half a minute.
const Propagation = 2 * time.Minute

// Program is a program's entry as the gate reads it.
type Program struct {
	Mode          string `json:"mode"`
	FailOpenUntil int64  `json:"failOpenUntil,omitempty"` // Unix seconds
	Session       int64  `json:"session"`                 // seconds
}

// ProgramOf is the entry of a program at the edge e.
func ProgramOf(e settings.Edge) Program {
	p := Program{Mode: cmp.Or(e.Mode, settings.EdgeOff), Session: int64(e.SessionLength() / time.Second)}
	if !e.FailOpenUntil.IsZero() {
		p.FailOpenUntil = e.FailOpenUntil.Unix()
	}
	return p
}

// Site is the rules the gate applies before any program's: the paths that
// never queue, the file extensions of static assets, the paths whose
// answers are JSON; and the routes, each a path prefix and its program.
type Site struct {
	Routes [][2]string `json:"routes"`
	Bypass []string    `json:"bypass"`
	Static []string    `json:"static"`
	API    []string    `json:"api"`
	JSON   bool        `json:"json"`
}

// DefaultSite is the rules without routes, those the gate applies when it
// finds none: robots.txt, the favicon, a health check, /static/ and the
// usual asset types never queue; /api/ answers JSON.
func DefaultSite() Site {
	return Site{
		Bypass: []string{"/robots.txt", "/favicon.ico", "/health", "/static/"},
		Static: []string{"css", "js", "mjs", "png", "jpg", "jpeg", "gif", "svg", "webp", "avif", "ico", "woff", "woff2", "ttf", "map", "txt"},
		API:    []string{"/api/"},
		JSON:   true,
	}
}

// Programs lists the programs; *queue.Service is one.
type Programs interface {
	ListPrograms(ctx context.Context, cursor string, limit int) (queue.ProgramList, error)
}

// Publisher writes the gate's entries to a KeyValueStore.
type Publisher struct {
	kv       edgekv.Store
	site     Site
	programs Programs
	clock    clock.Clock
}

// NewPublisher returns a Publisher to kv, with site's rules (its Routes are
// made from programs) and clk's time for the keys.
func NewPublisher(kv edgekv.Store, site Site, programs Programs, clk clock.Clock) *Publisher {
	return &Publisher{kv: kv, site: site, programs: programs, clock: clk}
}

// Changed publishes a change of program c (of a deleted one: its ID
// alone): its entry, the routes of every program, and a first key when c
// is at the gate and the store holds none.
func (p *Publisher) Changed(ctx context.Context, c admission.Counters) error {
	// The program's entry first: its mode and break-glass get through even
	// when the routes no longer fit.
	if err := p.Program(ctx, c); err != nil {
		return err
	}
	err := p.update(ctx, SiteKey, func() (string, error) {
		all, err := p.list(ctx)
		if err != nil {
			return "", err
		}
		return p.siteValue(all)
	})
	if err != nil || c.Edge.Mode == "" {
		return err
	}
	return p.EnsureKeys(ctx)
}

func (p *Publisher) list(ctx context.Context) ([]admission.Counters, error) {
	return ListAll(ctx, p.programs)
}

// ListAll reads every program of programs, page by page.
func ListAll(ctx context.Context, programs Programs) ([]admission.Counters, error) {
	var all []admission.Counters
	for cursor := ""; ; {
		l, err := programs.ListPrograms(ctx, cursor, catalog.MaxLimit)
		if err != nil {
			return nil, fmt.Errorf("edge: list programs: %w", err)
		}
		all = append(all, l.Programs...)
		if cursor = l.Next; cursor == "" {
			return all, nil
		}
	}
}

// Program writes c's entry, p.<id>; a deleted program's is mode off.
func (p *Publisher) Program(ctx context.Context, c admission.Counters) error {
	return p.put(ctx, ProgramKey(c.ProgramID), ProgramOf(c.Edge))
}

// Routes writes site with the routes of programs, which must be every
// program; ErrRoutesTooLong when they do not fit in one store value.
func (p *Publisher) Routes(ctx context.Context, programs []admission.Counters) error {
	site, err := p.siteValue(programs)
	if err != nil {
		return err
	}
	if err := p.kv.Put(ctx, SiteKey, site); err != nil {
		return fmt.Errorf("edge: publish %s: %w", SiteKey, err)
	}
	return nil
}

// errUnchanged is what a compute of update returns to write nothing.
var errUnchanged = errors.New("edge: unchanged")

// conditional is an edgekv.Store that writes only if nothing changed since
// a version it read (*edgekv.Client is one).
type conditional interface {
	ETag(ctx context.Context) (string, error)
	PutIf(ctx context.Context, key, value, etag string) error
}

// update writes key with what compute makes from reads it does after the
// store's version was read, again when another write came between, so
// that two publishers at once lose nothing; a store without versions is
// written as it is.
func (p *Publisher) update(ctx context.Context, key string, compute func() (string, error)) error {
	c, ok := p.kv.(conditional)
	for attempt := 1; ; attempt++ {
		etag := ""
		if ok {
			var err error
			if etag, err = c.ETag(ctx); err != nil {
				return fmt.Errorf("edge: publish %s: %w", key, err)
			}
		}
		v, err := compute()
		if errors.Is(err, errUnchanged) {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			err = p.kv.Put(ctx, key, v)
		} else if err = c.PutIf(ctx, key, v, etag); errors.Is(err, edgekv.ErrStale) && attempt < edgekv.MaxPutAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("edge: publish %s: %w", key, err)
		}
		return nil
	}
}

// ErrRoutesTooLong is the error of routes that do not fit in one store value.
var ErrRoutesTooLong = errors.New("edge: the programs' paths at the gate take over the 1,024 bytes of one store value")

// Fits reports ErrRoutesTooLong when putting program c at e makes routes
// that do not fit in one store value and are longer than before (a change
// that shortens them always fits: it is how to recover).
func (p *Publisher) Fits(ctx context.Context, c admission.Counters, e settings.Edge) error {
	all, err := p.list(ctx)
	if err != nil {
		return err
	}
	before, _ := json.Marshal(p.siteOf(all))
	c.Edge = e
	all = append(slices.DeleteFunc(all, func(o admission.Counters) bool { return o.ProgramID == c.ProgramID }), c)
	after, _ := json.Marshal(p.siteOf(all))
	if len(after) > edgekv.MaxValueBytes && len(after) > len(before) {
		return fmt.Errorf("%w (%d)", ErrRoutesTooLong, len(after))
	}
	return nil
}

func (p *Publisher) siteValue(programs []admission.Counters) (string, error) {
	b, err := json.Marshal(p.siteOf(programs))
	if err != nil {
		return "", fmt.Errorf("edge: site: %w", err)
	}
	if len(b) > edgekv.MaxValueBytes {
		return "", fmt.Errorf("%w (%d)", ErrRoutesTooLong, len(b))
	}
	return string(b), nil
}

// siteOf is the site's rules with the routes of programs: each path of
// those whose mode is not off, longest first, then by path and id.
func (p *Publisher) siteOf(programs []admission.Counters) Site {
	site := p.site
	site.Routes = nil
	for _, c := range programs {
		if c.Edge.Mode == "" {
			continue
		}
		for _, path := range c.Edge.Paths {
			site.Routes = append(site.Routes, [2]string{path, c.ProgramID})
		}
	}
	// Longest first; a path two programs claim is the first id's (the gate takes the first match).
	slices.SortFunc(site.Routes, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(len(b[0]), len(a[0])), cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	return site
}

// Now is the publisher's time.
func (p *Publisher) Now() time.Time { return p.clock.Now() }

// Keys reads the published keys (zero Keys when none are).
func (p *Publisher) Keys(ctx context.Context) (edgetoken.Keys, error) {
	return ReadKeys(ctx, p.kv)
}

// RotateKeys publishes a new key that signs from now+Propagation, keeping
// the key that signs now to verify (and sign until then); with drop, the
// new key signs at once and no other verifies, which ends every edge
// session made before.
func (p *Publisher) RotateKeys(ctx context.Context, drop bool) (edgetoken.Keys, error) {
	return p.updateKeys(ctx, func(ks edgetoken.Keys, now time.Time) (edgetoken.Keys, error) {
		next, err := edgetoken.NewKey(rand.Text()[:12]) // unique: two rotations in a second must not share an id
		if err != nil {
			return ks, err
		}
		switch {
		case drop || ks.Current.ID == "":
			return edgetoken.Keys{Current: next}, nil // signs at once: no other key could
		case now.Unix() < ks.Current.From && ks.Previous != nil:
			// The current key has not signed yet: the new one replaces it,
			// and the key that signs keeps signing until the new one's turn.
			next.From = now.Add(Propagation).Unix()
			ks.Current = next
			return ks, nil
		}
		next.From = now.Add(Propagation).Unix()
		return ks.Rotated(next), nil
	})
}

// EnsureKeys makes the first key when the store holds none.
func (p *Publisher) EnsureKeys(ctx context.Context) error {
	_, err := p.updateKeys(ctx, func(ks edgetoken.Keys, now time.Time) (edgetoken.Keys, error) {
		if ks.Current.ID != "" {
			return ks, errUnchanged
		}
		next, err := edgetoken.NewKey(rand.Text()[:12])
		return edgetoken.Keys{Current: next}, err
	})
	return err
}

// updateKeys writes the keys change makes of those published, read again
// if another write came between (update).
func (p *Publisher) updateKeys(ctx context.Context, change func(edgetoken.Keys, time.Time) (edgetoken.Keys, error)) (edgetoken.Keys, error) {
	var ks edgetoken.Keys
	err := p.update(ctx, KeysKey, func() (string, error) {
		cur, err := ReadKeys(ctx, p.kv)
		if err == nil {
			ks, err = change(cur, p.clock.Now())
		}
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(ks)
		return string(b), err
	})
	return ks, err
}

// ReadKeys reads the keys from kv (zero Keys when none are published).
func ReadKeys(ctx context.Context, kv edgekv.Store) (edgetoken.Keys, error) {
	var ks edgetoken.Keys
	v, err := kv.Get(ctx, KeysKey)
	switch {
	case errors.Is(err, edgekv.ErrNotFound):
		return ks, nil
	case err != nil:
		return ks, fmt.Errorf("edge: read keys: %w", err)
	}
	if err := json.Unmarshal([]byte(v), &ks); err != nil {
		return ks, fmt.Errorf("edge: read keys: %w", err)
	}
	return ks, nil
}

func (p *Publisher) put(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("edge: %s: %w", key, err)
	}
	if err := p.kv.Put(ctx, key, string(b)); err != nil {
		return fmt.Errorf("edge: publish %s: %w", key, err)
	}
	return nil
}
