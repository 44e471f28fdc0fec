package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
)

func (a *api) getProgram(w http.ResponseWriter, r *http.Request) {
	c, err := a.svc.Program(r.Context(), r.PathValue("programId"))
	a.writeCounters(w, r, http.StatusOK, c, err)
}

func (a *api) putProgram(w http.ResponseWriter, r *http.Request) {
	var b programBody
	if err := decodeObject(r, b.fields()...); err != nil {
		a.writeError(w, r, err)
		return
	}
	set, err := b.settings()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	c, created, err := a.svc.PutProgram(r.Context(), r.PathValue("programId"), set)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.writeCounters(w, r, status, c, err)
}

func (a *api) admit(w http.ResponseWriter, r *http.Request) {
	var count *int64
	if err := decodeObject(r, field{"count", &count, "number"}); err != nil {
		a.writeError(w, r, err)
		return
	}
	if count == nil {
		a.writeError(w, r, queue.Errorf(queue.KindInvalid, queue.CodeInvalidCount, "count is required."))
		return
	}
	c, err := a.svc.Admit(r.Context(), r.PathValue("programId"), *count)
	a.writeCounters(w, r, http.StatusOK, c, err)
}

// countersBody is the admin view of a program.
type countersBody struct {
	ProgramID              string  `json:"programId"`
	Issued                 int64   `json:"issued"`
	Admitted               int64   `json:"admitted"`
	Waiting                int64   `json:"waiting"`
	AdmissionRatePerSecond float64 `json:"admissionRatePerSecond"`
	Paused                 bool    `json:"paused"`
	Closed                 bool    `json:"closed"`
	AdmissionWindowSeconds int64   `json:"admissionWindowSeconds"`
	CreatedAt              string  `json:"createdAt"`
	// PollingPolicy is the program's own policy; absent for the default.
	PollingPolicy string `json:"pollingPolicy,omitempty"`
	// EffectiveAt is when the last change takes effect, while it has not.
	EffectiveAt string `json:"effectiveAt,omitempty"`
	// The opening: its instant, whether it shuffles, the commitment; the
	// pre-queue's size once fixed (the seed is in the queue's answers).
	OpensAt           string `json:"opensAt,omitempty"`
	ShuffleAtOpen     bool   `json:"shuffleAtOpen,omitempty"`
	ShuffleCommitment string `json:"shuffleCommitment,omitempty"`
	Prequeue          *int64 `json:"prequeue,omitempty"`
	// The profile's fields, each absent while empty.
	queue.Profile
}

// programBody is the admin PUT body; absent fields keep their value.
type programBody struct {
	AdmissionRatePerSecond *rateNumber
	Paused                 *bool
	AdmissionWindowSeconds *int64
	PollingPolicy          *string
	Closed                 *bool
	OpensAt                *string // RFC 3339, "" clears
	ShuffleAtOpen          *bool
	Profile                []*string // queue.ProfileFields' values, in order
}

// rateNumber is a JSON number that underflows to the smallest float64 of
// its sign rather than to 0: 1e-400 is a rate too small, not 0 (manual
// admission only).
type rateNumber float64

func (n *rateNumber) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(string(b)), "e")
	if f == 0 && strings.ContainsAny(mantissa, "123456789") {
		f = math.SmallestNonzeroFloat64
		if strings.HasPrefix(mantissa, "-") {
			f = -f
		}
	}
	*n = rateNumber(f)
	return nil
}

// fields are programBody's JSON keys.
func (b *programBody) fields() []field {
	fs := []field{
		{"admissionRatePerSecond", &b.AdmissionRatePerSecond, "number"},
		{"paused", &b.Paused, "boolean"},
		{"admissionWindowSeconds", &b.AdmissionWindowSeconds, "number"},
		{"pollingPolicy", &b.PollingPolicy, "string"},
		{"closed", &b.Closed, "boolean"},
		{"opensAt", &b.OpensAt, "string"},
		{"shuffleAtOpen", &b.ShuffleAtOpen, "boolean"},
	}
	b.Profile = make([]*string, len(queue.ProfileFields))
	for i, f := range queue.ProfileFields {
		fs = append(fs, field{f.Name, &b.Profile[i], "string"})
	}
	return fs
}

func (b programBody) settings() (queue.Settings, error) {
	set := queue.Settings{AdmissionRatePerSecond: (*float64)(b.AdmissionRatePerSecond), Paused: b.Paused, PollingPolicy: b.PollingPolicy, Closed: b.Closed, ShuffleAtOpen: b.ShuffleAtOpen}
	if o := b.OpensAt; o != nil {
		var at time.Time // "" clears the opening, and only ""
		if *o != "" {
			t, err := time.Parse(time.RFC3339, *o)
			if err != nil || !queue.ValidOpening(t) {
				return set, queue.ErrInvalidOpening()
			}
			at = t
		}
		set.OpensAt = &at
	}
	for i, v := range b.Profile {
		if v != nil {
			if set.Profile == nil {
				set.Profile = map[string]string{}
			}
			set.Profile[queue.ProfileFields[i].Name] = *v
		}
	}
	if r := set.AdmissionRatePerSecond; r != nil && *r == 0 {
		*r = 0 // -0 is 0: manual admission, never echoed as -0
	}
	if w := b.AdmissionWindowSeconds; w != nil {
		if *w < 0 || *w > math.MaxInt64/int64(time.Second) {
			return set, queue.Errorf(queue.KindInvalid, queue.CodeInvalidSettings, "admissionWindowSeconds is out of range.")
		}
		d := time.Duration(*w) * time.Second
		set.AdmissionWindow = &d
	}
	return set, nil
}

func (a *api) writeCounters(w http.ResponseWriter, r *http.Request, status int, c queue.Counters, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	n := metrics.Note(r.Context())
	n.Waiting, n.WaitingKnown = c.Waiting, true
	var prequeue *int64
	if c.PrequeueFixed {
		prequeue = &c.Prequeue
	}
	writeJSON(w, status, countersBody{
		OpensAt:                timeString(c.OpensAt),
		ShuffleAtOpen:          c.ShuffleAtOpen,
		ShuffleCommitment:      c.ShuffleCommitment,
		Prequeue:               prequeue,
		ProgramID:              c.ProgramID,
		Issued:                 c.Issued,
		Admitted:               c.Admitted,
		Waiting:                c.Waiting,
		AdmissionRatePerSecond: c.Rate,
		Paused:                 c.Paused,
		Closed:                 c.Closed,
		AdmissionWindowSeconds: int64(c.AdmissionWindow / time.Second),
		CreatedAt:              timeString(c.CreatedAt),
		EffectiveAt:            timeString(c.EffectiveAt),
		PollingPolicy:          c.PollingPolicy,
		Profile:                c.Profile,
	})
}
