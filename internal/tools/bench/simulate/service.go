package simulate

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shuffle"
	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// serviceProgram is the simulated program's id.
const serviceProgram = "sim"

// serviceModel runs queue.Service on Config.Instances instances sharing one
// simulated table (store) and the virtual clock.
type serviceModel struct {
	cfg   Config
	clock *simclock.Fake
	store *store
	svcs  []*queue.Service
	// shuffleKey signs every instance's shuffle seed; seed is the seed
	// once revealed.
	shuffleKey shuffle.Key
	seed       string
	// offsets are the instances' clock offsets; slowest is the instance
	// whose clock is furthest behind, which checks every admission.
	offsets     []time.Duration
	slowest     *queue.Service
	rng         *rand.Rand
	ctx         context.Context
	regressions int64 // admitted users the slowest instance did not see admitted
}

func newServiceModel(cfg Config) (*serviceModel, error) {
	m := &serviceModel{
		cfg:     cfg,
		clock:   simclock.NewFake(Epoch),
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		ctx:     context.Background(),
		offsets: clockOffsets(cfg.Seed, max(cfg.Instances, 1), cfg.ClockSkew),
	}
	var model *partitionmodel.Model
	writeLimit := float64(tickets.DefaultItemWriteUnits)
	if cfg.PartitionLimits != nil {
		model = partitionmodel.NewModel(*cfg.PartitionLimits)
		writeLimit = cfg.PartitionLimits.WriteUnits
	}
	if cfg.SingleTickets {
		writeLimit = 0 // every ticket from the program item, as before ticket shards
	}
	m.store = newStore(m.clock, model)
	var signer queue.PassSigner
	var err error
	if cfg.Shuffle {
		m.shuffleKey, err = shufflekey.GenerateLocalKey()
	}
	if err == nil && cfg.following() {
		signer, err = passSigner()
	}
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	for i, off := range m.offsets {
		clk, rng := simclock.Offset{Base: m.clock, By: off}, rand.New(rand.NewPCG(cfg.Seed+uint64(i)+1, 7))
		opts := []tickets.Option{tickets.WithItemWriteLimit(writeLimit), tickets.WithClock(clk), tickets.WithRand(rng)}
		if cfg.FixedShards > 0 {
			opts = append(opts, tickets.WithFixedSizing(cfg.FixedShards, cfg.FixedBlock))
		}
		shards := tickets.New(m.store, opts...)
		m.svcs = append(m.svcs, queue.NewService(m.store, cfg.Policy.Policy,
			queue.WithClock(clk), queue.WithProgramCache(time.Second), queue.WithTickets(shards),
			queue.WithRand(rng), queue.WithShuffleKey(m.shuffleKey), queue.WithPassSigner(signer)))
	}
	m.slowest = m.svcs[slices.Index(m.offsets, slices.Min(m.offsets))]
	if _, _, err := m.svcs[0].PutProgram(m.ctx, serviceProgram, programSettings(cfg)); err != nil {
		return nil, fmt.Errorf("simulate: create the program: %w", err)
	}
	return m, nil
}

// programSettings are the simulated program's settings at its creation.
func programSettings(cfg Config) api.ProgramSettings {
	first := cfg.Scenario.Rates[0]
	set := api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(first.Rate)), Paused: new(first.Paused)}
	if first.Rate == 0 {
		set = api.ProgramSettings{Paused: new(true)}
	}
	cfg.Crowd.Settings(&set)
	if cfg.OpensAt > 0 {
		set.OpensAt = new(Epoch.Add(cfg.OpensAt).Format(time.RFC3339Nano))
		set.ShuffleAtOpen = new(cfg.Shuffle)
	}
	return set
}

// clockOffsets are n instances' clock offsets, uniform in [−skew, +skew]
// (skew ≥ 0) and drawn from seed.
func clockOffsets(seed uint64, n int, skew time.Duration) []time.Duration {
	offsets := make([]time.Duration, n)
	if skew <= 0 {
		return offsets
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int64N(2*int64(skew)+1)) - skew
	}
	return offsets
}

func (m *serviceModel) instance() *queue.Service { return m.svcs[m.rng.IntN(len(m.svcs))] }

func (m *serviceModel) tick(t int64) {
	if t > 0 {
		m.clock.Advance(time.Millisecond)
	}
}

// program reads the program from the table, uncharged.
func (m *serviceModel) program() admission.Program {
	p, _ := m.store.Store.GetProgram(m.ctx, serviceProgram)
	return p
}

func (m *serviceModel) serving() int64 { return m.program().Serving(m.clock.Now()) }

func (m *serviceModel) enter(u int) (answer, error) {
	v, _, err := m.instance().Enter(m.ctx, serviceProgram, queue.Entry{IdempotencyKey: fmt.Sprintf("simulated-user-%010d", u)})
	return m.answer(v, err)
}

func (m *serviceModel) poll(us *user) (answer, error) {
	return m.answer(m.instance().Poll(m.ctx, serviceProgram, us.token))
}

// answer reads the service's view, or passes its error on. With clock
// skew, an admission is asked again, uncounted, of the slowest instance,
// and a regression counted unless it answers ADMITTED too.
func (m *serviceModel) answer(v queue.View, err error) (answer, error) {
	if err != nil {
		return answer{}, err
	}
	a := answer{token: v.TokenID, ticket: v.Ticket, admitted: v.Status == queue.StatusAdmitted, pass: v.AdmissionPass, expiresAt: v.ExpiresAt}
	if !a.admitted {
		a.retryAfter = v.RetryAfter
		if v.Status == queue.StatusWaiting {
			a.position = v.Position
		}
		return a, nil
	}
	if m.cfg.ClockSkew > 0 {
		if w, err := m.slowest.Poll(m.ctx, serviceProgram, v.TokenID); err == nil && w.Status != queue.StatusAdmitted {
			m.regressions++
		}
	}
	return a, nil
}

// place is us's place in the admission order: its ticket, or in a shuffled
// pre-queue its place in the seed's permutation (as Program.Place).
func (m *serviceModel) place(us user, p admission.Program) int64 {
	if !p.Shuffle || !p.PrequeueFixed || us.ticket > p.Prequeue {
		return us.ticket
	}
	if m.seed == "" {
		var err error
		if m.seed, err = shuffle.SignSeed(m.ctx, m.shuffleKey, serviceProgram, p.ShuffleNonce); err != nil {
			return us.ticket
		}
	}
	return shuffle.PlaceOf(m.seed, p.Prequeue, us.ticket)
}

func (m *serviceModel) release(pass string) error {
	return m.instance().ReleaseSession(m.ctx, serviceProgram, pass)
}

func (m *serviceModel) finish(r *bench.Result) {
	r.Instances, r.CacheTTLMs = len(m.svcs), time.Second.Milliseconds()
	writes := m.store.maxProgramWrite
	r.ProgramItemWritesPerSecondMax = &writes
	if m.store.model != nil {
		sum := m.store.model.Summarize()
		r.StoreThrottles = sum.ThrottledReads + sum.ThrottledWrites
	}
	r.StatusRegressions = m.regressions
	if len(m.store.capWrites) > 0 {
		r.CapacityWrites = maps.Clone(m.store.capWrites)
	}
	if m.cfg.ClockSkew > 0 {
		r.ClockSkewMs = bench.Ms(m.cfg.ClockSkew)
		r.ClockSpreadMs = bench.Ms(slices.Max(m.offsets) - slices.Min(m.offsets))
	}
}
