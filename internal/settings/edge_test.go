package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/settings"
)

func TestEdgeSettings(t *testing.T) {
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	start := settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/"}, SessionSeconds: 600, FailOpenUntil: at}
	for _, tc := range []struct {
		name    string
		set     api.ProgramSettings
		want    settings.Edge
		problem string // the start of the error; "" for none
	}{
		{"nothing", api.ProgramSettings{}, start, ""},
		{"standby", api.ProgramSettings{EdgeMode: new("standby")}, settings.Edge{Mode: "standby", Paths: []string{"/"}, SessionSeconds: 600, FailOpenUntil: at}, ""},
		{"off is stored as none", api.ProgramSettings{EdgeMode: new("off")}, settings.Edge{Paths: []string{"/"}, SessionSeconds: 600, FailOpenUntil: at}, ""},
		{"mode unknown", api.ProgramSettings{EdgeMode: new("ON")}, start, "edgeMode must be"},
		{"paths", api.ProgramSettings{EdgePaths: &[]string{"/tickets/", "/api/cart"}}, settings.Edge{Mode: "on", Paths: []string{"/tickets/", "/api/cart"}, SessionSeconds: 600, FailOpenUntil: at}, ""},
		{"paths cleared", api.ProgramSettings{EdgePaths: &[]string{}}, settings.Edge{Mode: "on", SessionSeconds: 600, FailOpenUntil: at}, ""},
		{"path relative", api.ProgramSettings{EdgePaths: &[]string{"tickets/"}}, start, "edgePaths must be"},
		{"path of another host", api.ProgramSettings{EdgePaths: &[]string{"//evil.example/"}}, start, "edgePaths must be"},
		{"path with a query", api.ProgramSettings{EdgePaths: &[]string{"/a?b"}}, start, "edgePaths must be"},
		{"path with a space", api.ProgramSettings{EdgePaths: &[]string{"/a b"}}, start, "edgePaths must be"},
		{"path not ASCII", api.ProgramSettings{EdgePaths: &[]string{"/é"}}, start, "edgePaths must be"},
		{"path twice", api.ProgramSettings{EdgePaths: &[]string{"/a", "/a"}}, start, "edgePaths must be"},
		{"path too long", api.ProgramSettings{EdgePaths: &[]string{"/" + strings.Repeat("a", settings.MaxEdgePathLen)}}, start, "edgePaths must be"},
		{"too many paths", api.ProgramSettings{EdgePaths: &[]string{"/1", "/2", "/3", "/4", "/5", "/6", "/7", "/8", "/9", "/10", "/11"}}, start, "edgePaths must hold"},
		{"session", api.ProgramSettings{EdgeSessionSeconds: new(int64(86400))}, settings.Edge{Mode: "on", Paths: []string{"/"}, SessionSeconds: 86400, FailOpenUntil: at}, ""},
		{"session default", api.ProgramSettings{EdgeSessionSeconds: new(int64(0))}, settings.Edge{Mode: "on", Paths: []string{"/"}, FailOpenUntil: at}, ""},
		{"session too short", api.ProgramSettings{EdgeSessionSeconds: new(int64(59))}, start, "edgeSessionSeconds must be"},
		{"break-glass", api.ProgramSettings{FailOpenUntil: new("2026-12-04T21:30:00.9+01:00")}, settings.Edge{Mode: "on", Paths: []string{"/"}, SessionSeconds: 600, FailOpenUntil: at.Add(30 * time.Minute)}, ""},
		{"break-glass cleared", api.ProgramSettings{FailOpenUntil: new("")}, settings.Edge{Mode: "on", Paths: []string{"/"}, SessionSeconds: 600}, ""},
		{"break-glass not a time", api.ProgramSettings{FailOpenUntil: new("tomorrow")}, start, "failOpenUntil must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := settings.Options{Edge: start}
			o.Edge.Paths = append([]string(nil), start.Paths...)
			var seg pace.Segment
			err := settings.Apply(tc.set, &o, &seg, nil)
			switch {
			case tc.problem == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tc.problem != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.problem)):
				t.Fatalf("Apply: %v; want %q…", err, tc.problem)
			case tc.problem == "":
				if diff := cmp.Diff(tc.want, o.Edge); diff != "" {
					t.Errorf("edge (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestEdgeSessionLength(t *testing.T) {
	now := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		e    settings.Edge
		want time.Duration
	}{
		{settings.Edge{FailOpenUntil: now}, settings.DefaultEdgeSession},
		{settings.Edge{SessionSeconds: 600}, 10 * time.Minute},
	} {
		if got := tc.e.SessionLength(); got != tc.want {
			t.Errorf("%+v: session %v, want %v", tc.e, got, tc.want)
		}
	}
}
