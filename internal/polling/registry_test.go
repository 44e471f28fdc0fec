package polling_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/polling"
)

func TestNamed(t *testing.T) {
	tiers := polling.Tiers{{MaxPosition: 0, Interval: 2e9}}
	reg := polling.Named(tiers, polling.DefaultETA(), polling.DefaultSteady())
	if diff := cmp.Diff([]string{"eta", "steady", "tiers"}, reg.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for _, name := range reg.Names() {
		if got := fmt.Sprint(reg[name]); got != name {
			t.Errorf("policy %q calls itself %q", name, got)
		}
	}
	eta := reg[polling.NameETA].(polling.ETA)
	if diff := cmp.Diff(polling.Policy(tiers), eta.Fallback); diff != "" {
		t.Errorf("eta falls back to (-want +got):\n%s", diff)
	}
	steady := reg[polling.NameSteady].(polling.Steady)
	if diff := cmp.Diff(polling.Policy(eta), steady.Fallback); diff != "" {
		t.Errorf("steady falls back to (-want +got):\n%s", diff)
	}
}

func TestRegistryLookup(t *testing.T) {
	reg := polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())
	tests := []struct {
		name, want, wantErr string
	}{
		{"", "tiers", ""},
		{"tiers", "tiers", ""},
		{"eta", "eta", ""},
		{"steady", "steady", ""},
		{"ETA", "", `"ETA" is not one of eta, steady, tiers`},
		{"fastest", "", `"fastest" is not one of eta, steady, tiers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.Lookup(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(p) != tt.want {
				t.Errorf("Lookup(%q) = %v, %v; want %s", tt.name, p, err, tt.want)
			}
		})
	}
}
