package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSimulatePush: -push-share runs each policy once per share, side by
// side and named for it; -push-share 0 changes nothing; the sender's prices
// are flags; and push is refused with the service's flags.
func TestSimulatePush(t *testing.T) {
	args := []string{"simulate", "-users", "500", "-admit-rate", "10", "-policy", "tiers,eta", "-seed", "2"}
	plain, errOut, err := runCmd(t, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	zero, errOut, err := runCmd(t, append(args, "-push-share", "0")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if diff := cmp.Diff(plain, zero); diff != "" {
		t.Errorf("-push-share 0 changed the table (-without +with):\n%s", diff)
	}

	type usage struct {
		SenderMinutes int64   `json:"senderMinutes"`
		PushWRU       float64 `json:"pushWRU"`
		PushRRU       float64 `json:"pushRRU"`
	}
	type row struct {
		Policy        string   `json:"policy"`
		PushShare     *float64 `json:"pushShare"`
		PushLatencyMs float64  `json:"pushLatencyMs"`
		Subscribed    int      `json:"subscribed"`
		PushesReady   int64    `json:"pushesReady"`
		PushesTurn    int64    `json:"pushesTurn"`
		Cost          struct {
			Usage usage `json:"usage"`
		} `json:"costUSD"`
	}
	got := runJSON[row](t, nil, 4, append(args, "-push-share", "0,1", "-push-latency", "250ms", "-push-wru", "3", "-push-index-wru", "0", "-push-list-rru", "2", "-json")...)
	var names []string
	for _, r := range got {
		names = append(names, r.Policy)
		if r.PushShare == nil {
			t.Fatalf("%s: no pushShare", r.Policy)
		}
		subscribed := int(*r.PushShare * 500)
		u := r.Cost.Usage
		if r.Subscribed != subscribed || r.PushesTurn != int64(subscribed) || r.PushLatencyMs != 250 ||
			u.PushWRU != 3*float64(r.PushesReady+2*r.PushesTurn) || u.PushRRU != 2*float64(r.PushesTurn) {
			t.Errorf("%+v", r)
		}
	}
	if diff := cmp.Diff([]string{"tiers, push 0%", "tiers, push 100%", "eta, push 0%", "eta, push 100%"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	table, errOut, err := runCmd(t, append(args, "-push-share", "0.5")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"| metric | tiers, push 50% | eta, push 50% |", "| pushes sent: your turn (each a poll) |", "| cost: push sender Lambda |", "| notify delay p99 |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-push-share", "0.5", "-partition-model"}, "-push-share is simulated on the program model only"},
		{[]string{"-push-share", "1", "-max-active", "10", "-session", "5s-10s"}, "-max-active"},
		{[]string{"-push-share", "0,1.5"}, "-push-share \"0,1.5\""},
		{[]string{"-push-share", "half"}, "want shares in [0, 1]"},
		{[]string{"-push-share", "1", "-push-latency", "-1s"}, "-push-latency"},
	} {
		_, errOut, err := runCmd(t, append(args, tc.flags...)...)
		if !errors.Is(err, errUsage) || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %v, %q; want a usage error naming %q", tc.flags, err, errOut, tc.want)
		}
	}
	// Share 0 with the service is the service's run, as without the flag.
	if _, errOut, err := runCmd(t, "simulate", "-users", "50", "-admit-rate", "10", "-partition-model", "-push-share", "0", "-json"); err != nil {
		t.Errorf("-push-share 0 -partition-model: %v: %s", err, errOut)
	}
}
