package main

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
)

// TestSettingsOf: each JSON field of the settings gets a flag, named and
// explained by settingFlags or else after the field and parsed by its type.
func TestSettingsOf(t *testing.T) {
	t.Parallel()
	type settings struct {
		Paused         *bool    `json:"paused,omitempty"`
		MaxWaitSeconds *int64   `json:"maxWaitSeconds,omitempty"`
		Ratio          *float64 `json:"ratio"`
		Banner         *string  `json:"banner,omitempty"`
		Internal       *string  `json:"-"`
	}
	got := settingsOf(reflect.TypeFor[settings](), settingFlags)
	want := []setting{
		{"paused", "paused", boolean, "stop admission (-paused=false restarts it)"},
		{"max-wait-seconds", "maxWaitSeconds", integer, "the program's `maxWaitSeconds`"},
		{"ratio", "ratio", number, "the program's `ratio`"},
		{"banner", "banner", text, "the program's `banner`"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(setting{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestProgramSettingsFlags: every entry of settingFlags is a setting of
// the API, and every setting has a flag of its own.
func TestProgramSettingsFlags(t *testing.T) {
	t.Parallel()
	fields, flags := map[string]bool{}, map[string]bool{}
	for _, s := range programSettings {
		if flags[s.flag] {
			t.Errorf("two settings on flag -%s", s.flag)
		}
		fields[s.field], flags[s.flag] = true, true
	}
	for field := range settingFlags {
		if !fields[field] {
			t.Errorf("settingFlags names %s, which api.ProgramSettings does not have", field)
		}
	}
	if n := reflect.TypeFor[api.ProgramSettings]().NumField(); len(programSettings) != n {
		t.Errorf("%d settings for the %d fields of api.ProgramSettings", len(programSettings), n)
	}
}
