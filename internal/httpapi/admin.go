package httpapi

import (
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
)

func (a *api) getProgram(w http.ResponseWriter, r *http.Request) {
	c, err := a.svc.Program(r.Context(), r.PathValue("programId"))
	a.writeCounters(w, r, http.StatusOK, c, err)
}

func (a *api) putProgram(w http.ResponseWriter, r *http.Request) {
	var b wire.ProgramSettings
	if err := decodeObject(r, &b); err != nil {
		a.writeError(w, r, err)
		return
	}
	set, err := settingsOf(b)
	if err != nil {
		a.writeError(w, r, wireNamed(err))
		return
	}
	c, created, err := a.svc.PutProgram(r.Context(), r.PathValue("programId"), set)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.writeCounters(w, r, status, c, wireNamed(err))
}

func (a *api) admit(w http.ResponseWriter, r *http.Request) {
	var b wire.Admission
	if err := decodeObject(r, &b); err != nil {
		a.writeError(w, r, err)
		return
	}
	if b.Count == nil {
		a.writeError(w, r, queue.Errorf(queue.KindInvalid, wire.CodeInvalidCount, "count is required."))
		return
	}
	c, err := a.svc.Admit(r.Context(), r.PathValue("programId"), *b.Count)
	a.writeCounters(w, r, http.StatusOK, c, err)
}

// settingsOf is the PUT body b as the domain's Settings, one line a
// setting (the profile's fields by their names).
func settingsOf(b wire.ProgramSettings) (queue.Settings, error) {
	set := queue.Settings{
		AdmissionRatePerSecond: (*float64)(b.AdmissionRatePerSecond),
		Paused:                 b.Paused,
		PollingPolicy:          b.PollingPolicy,
		Closed:                 b.Closed,
		ShuffleAtOpen:          b.ShuffleAtOpen,
	}
	var err error
	if set.OpensAt, err = openingOf(b.OpensAt); err != nil {
		return set, err
	}
	if set.AdmissionWindow, err = secondsOf(b.AdmissionWindowSeconds, "AdmissionWindow"); err != nil {
		return set, err
	}
	profile := map[string]*string{"displayName": b.DisplayName, "message": b.Message, "notice": b.Notice, "targetUrl": b.TargetURL}
	for name, v := range profile {
		if v != nil {
			if set.Profile == nil {
				set.Profile = map[string]string{}
			}
			set.Profile[name] = *v
		}
	}
	return set, nil
}

// programOf is the admin view of c, one line a value.
func programOf(c queue.Counters) wire.Program {
	view := wire.Program{
		ProgramID:              c.ProgramID,
		Issued:                 c.Issued,
		Admitted:               c.Admitted,
		Waiting:                c.Waiting,
		AdmissionRatePerSecond: c.Rate,
		Paused:                 c.Paused,
		Closed:                 c.Closed,
		AdmissionWindowSeconds: int64(c.AdmissionWindow / time.Second),
		CreatedAt:              wire.TimeOf(c.CreatedAt),
		PollingPolicy:          c.Policy,
		EffectiveAt:            wire.TimeOf(c.EffectiveAt),
		OpensAt:                wire.TimeOf(c.OpensAt),
		ShuffleAtOpen:          c.Shuffle,
		ShuffleCommitment:      c.ShuffleCommitment,
		Profile:                wire.Profile(c.Profile),
	}
	if c.PrequeueFixed {
		view.Prequeue = &c.Prequeue
	}
	return view
}

// openingOf reads an opensAt: RFC 3339, or "" (and only "") for none.
func openingOf(v *string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	var at time.Time
	if *v != "" {
		t, err := time.Parse(time.RFC3339, *v)
		if err != nil || !queue.ValidOpening(t) {
			return nil, queue.ErrInvalidOpening()
		}
		at = t
	}
	return &at, nil
}

// secondsOf reads a number of seconds as the duration of setting.
func secondsOf(v *int64, setting string) (*time.Duration, error) {
	if v == nil {
		return nil, nil
	}
	if *v < 0 || *v > math.MaxInt64/int64(time.Second) {
		return nil, queue.ErrSettingOutOfRange(setting)
	}
	d := time.Duration(*v) * time.Second
	return &d, nil
}

// settingNames maps the domain's settings (queue.Settings' field names) to
// the PUT body's names: api.ProgramSettings' JSON names, by Go field name,
// and for a duration its name in seconds.
var settingNames = func() map[string]string {
	names := map[string]string{}
	t := reflect.TypeFor[wire.ProgramSettings]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[f.Name] = name
		names[strings.TrimSuffix(f.Name, "Seconds")] = name
	}
	return names
}()

// wireNamed is err with a setting's error naming the setting as the PUT
// body does.
func wireNamed(err error) error {
	var se *queue.SettingError
	if !errors.As(err, &se) {
		return err
	}
	name, ok := settingNames[se.Setting]
	if !ok {
		name = se.Setting // a profile field, named alike
	}
	return queue.Errorf(queue.KindInvalid, wire.CodeInvalidSettings, "%s %s.", name, se.Problem)
}

func (a *api) writeCounters(w http.ResponseWriter, r *http.Request, status int, c queue.Counters, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	n := metrics.Note(r.Context())
	n.Waiting, n.WaitingKnown = c.Waiting, true
	writeJSON(w, status, programOf(c))
}
