package simulate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// store is the simulated DynamoDB table: the in-memory store, charging every call on the
// program and shard items to the partition model (queue.ErrThrottled when over its limit).
type store struct {
	*memstore.Store
	clock clock.Clock
	model *partitionmodel.Model // nil: no limits, nothing counted
	// writeU and readU are the program item's units in the second unitsAt.
	unitsAt         int64
	writeU, readU   float64
	programWrites   map[int64]int64 // per second, counted with or without a model
	maxProgramWrite int64
	capWrites       map[string]int64 // the capacity records' writes, by kind
}

var (
	_ queue.Store         = (*store)(nil)
	_ tickets.Store       = (*store)(nil)
	_ queue.PrequeueStore = (*store)(nil)
	_ queue.ScheduleStore = (*store)(nil)
	_ capacity.Store      = (*store)(nil)
)

const programKey = "program"

func newStore(c clock.Clock, model *partitionmodel.Model) *store {
	return &store{Store: memstore.New(), clock: c, model: model, unitsAt: -1, programWrites: map[int64]int64{}, capWrites: map[string]int64{}}
}

// units returns the program item's write and read units (strongly
// consistent), recomputed once per virtual second.
func (s *store) units(id string) (float64, float64) {
	sec := s.clock.Now().Unix()
	if sec != s.unitsAt {
		s.unitsAt, s.writeU, s.readU = sec, 1, 1
		if p, err := s.Store.GetProgram(context.Background(), id); err == nil {
			if item, err := dynamostore.ProgramItem(p); err == nil {
				size := partitionmodel.ItemSizeOf(item)
				s.writeU, s.readU = partitionmodel.WriteUnits(size), partitionmodel.ReadUnits(size, true)
			}
		}
	}
	return s.writeU, s.readU
}

// take charges one call to item key; queue.ErrThrottled when its partition
// refuses it.
func (s *store) take(key string, kind partitionmodel.Kind, units float64) error {
	if s.model != nil && !s.model.Take(key, kind, units, s.clock.Now()) {
		return fmt.Errorf("simulated %s item: %w", key, queue.ErrThrottled)
	}
	return nil
}

// writeProgram charges a write of the program item.
func (s *store) writeProgram(id string) error {
	w, _ := s.units(id)
	if err := s.take(programKey, partitionmodel.Write, w); err != nil {
		return err
	}
	sec := s.clock.Now().Unix()
	s.programWrites[sec]++
	s.maxProgramWrite = max(s.maxProgramWrite, s.programWrites[sec])
	return nil
}

func (s *store) writeShard(i int) error {
	return s.take("shard"+strconv.Itoa(i), partitionmodel.Write, 1)
}

func (s *store) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	_, r := s.units(id)
	if err := s.take(programKey, partitionmodel.Read, r); err != nil {
		return admission.Program{}, err
	}
	return s.Store.GetProgram(ctx, id)
}

func (s *store) UpdateProgram(ctx context.Context, p admission.Program, expectIssued int64) error {
	if err := s.writeProgram(p.ID); err != nil {
		return err
	}
	return s.Store.UpdateProgram(ctx, p, expectIssued)
}

func (s *store) UpdateScheduled(ctx context.Context, p admission.Program) (int64, error) {
	if err := s.writeProgram(p.ID); err != nil {
		return 0, err
	}
	return s.Store.UpdateScheduled(ctx, p)
}

func (s *store) MoveDrain(ctx context.Context, p admission.Program, issued int64) error {
	if err := s.writeProgram(p.ID); err != nil {
		return err
	}
	return s.Store.MoveDrain(ctx, p, issued)
}

func (s *store) IssueTicket(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	if err := s.writeProgram(id); err != nil {
		return admission.Program{}, err
	}
	return s.Store.IssueTicket(ctx, id, now)
}

func (s *store) IssueTickets(ctx context.Context, id string, now time.Time, n int64) (admission.Program, error) {
	if err := s.writeProgram(id); err != nil {
		return admission.Program{}, err
	}
	return s.Store.IssueTickets(ctx, id, now, n)
}

func (s *store) SetShards(ctx context.Context, id string, from, k int) (bool, error) {
	if err := s.writeProgram(id); err != nil {
		return false, err
	}
	return s.Store.SetShards(ctx, id, from, k)
}

func (s *store) FixPrequeue(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	if err := s.writeProgram(id); err != nil {
		return admission.Program{}, err
	}
	return s.Store.FixPrequeue(ctx, id, now)
}

func (s *store) TakeShardTickets(ctx context.Context, id string, i int, notBefore time.Time, m int64) (tickets.Run, bool, error) {
	if err := s.writeShard(i); err != nil {
		return tickets.Run{}, false, err
	}
	return s.Store.TakeShardTickets(ctx, id, i, notBefore, m)
}

func (s *store) ClaimShard(ctx context.Context, id string, i int, claim string, now, notBefore, claimNotBefore time.Time) (tickets.Shard, bool, error) {
	if err := s.writeShard(i); err != nil {
		return tickets.Shard{}, false, err
	}
	return s.Store.ClaimShard(ctx, id, i, claim, now, notBefore, claimNotBefore)
}

func (s *store) FillShard(ctx context.Context, id string, i int, claim string, claimedAt time.Time, b tickets.Shard) (bool, error) {
	if err := s.writeShard(i); err != nil {
		return false, err
	}
	return s.Store.FillShard(ctx, id, i, claim, claimedAt, b)
}

func (s *store) TrimShard(ctx context.Context, id string, i int, start int64, reservedAt time.Time, back tickets.Run) (tickets.Run, bool, error) {
	if err := s.writeShard(i); err != nil {
		return tickets.Run{}, false, err
	}
	return s.Store.TrimShard(ctx, id, i, start, reservedAt, back)
}

func (s *store) ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error) {
	if err := s.writeProgram(p.ID); err != nil {
		return false, err
	}
	return s.Store.ReturnTickets(ctx, p, from)
}

func (s *store) ApplyFold(ctx context.Context, id string, prevFoldedAtMs int64, next capacity.Capacity) error {
	if err := s.writeProgram(id); err != nil {
		return err
	}
	s.capWrites["fold"]++
	return s.Store.ApplyFold(ctx, id, prevFoldedAtMs, next)
}

// The capacity records' writes, counted by kind (docs/benchmarks.md, "Cost model").

func (s *store) Sight(ctx context.Context, id string, place int64) (capacity.Group, error) {
	s.capWrites["sighting"]++
	return s.Store.Sight(ctx, id, place)
}

func (s *store) SealSightings(ctx context.Context, id string, g, through int64, now time.Time) (capacity.Group, error) {
	s.capWrites["no-show seal"]++
	return s.Store.SealSightings(ctx, id, g, through, now)
}

func (s *store) EndPlace(ctx context.Context, id string, place, q int64) (capacity.Group, error) {
	s.capWrites["end"]++
	return s.Store.EndPlace(ctx, id, place, q)
}

func (s *store) MoveEnd(ctx context.Context, id string, place, from, to int64) (capacity.Group, error) {
	s.capWrites["end moved"]++
	return s.Store.MoveEnd(ctx, id, place, from, to)
}

func (s *store) ExpireGroup(ctx context.Context, id string, g, through int64) (capacity.Group, error) {
	s.capWrites["expiry seal"]++
	return s.Store.ExpireGroup(ctx, id, g, through)
}

func (s *store) AddEnd(ctx context.Context, id string, q int64, k int, place int64) error {
	s.capWrites["end index"]++
	return s.Store.AddEnd(ctx, id, q, k, place)
}

func (s *store) SealEnds(ctx context.Context, id string, q int64, k int) ([]int64, error) {
	s.capWrites["end index seal"]++
	return s.Store.SealEnds(ctx, id, q, k)
}

func (s *store) PutMark(ctx context.Context, id string, m capacity.Mark) error {
	s.capWrites["mark"]++
	return s.Store.PutMark(ctx, id, m)
}
