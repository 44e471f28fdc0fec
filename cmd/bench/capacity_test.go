package main

import (
	"testing"
	"time"
)

// TestCapacityFlags reads the capacity flags into a crowd, and refuses
// them without -max-active or with a malformed -session.
func TestCapacityFlags(t *testing.T) {
	c := capacityFlags{maxActive: 50, noShow: 0.3, noShowSeconds: 10, session: "5s-20s"}
	got, err := c.capacity()
	if err != nil || got.MaxActive != 50 || got.NoShow != 0.3 || got.NoShowSeconds != 10 || got.SessionMin != 5*time.Second || got.SessionMax != 20*time.Second {
		t.Fatalf("capacity() = %+v, %v", got, err)
	}
	if got, err := (&capacityFlags{}).capacity(); got != nil || err != nil {
		t.Errorf("no flags: %+v, %v; want nil, nil", got, err)
	}
	for name, bad := range map[string]capacityFlags{
		"no cap":       {noShow: 0.3},
		"session":      {maxActive: 5, session: "5s"},
		"reversed":     {maxActive: 5, session: "20s-5s"},
		"no-show of 1": {maxActive: 5, noShow: 1},
	} {
		if _, err := bad.capacity(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
