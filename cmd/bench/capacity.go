package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/tools/bench/loadtest"
)

// capacityFlags are the flags of run and compare for a program with an
// active-user cap (issue 19).
type capacityFlags struct {
	maxActive, noShowSeconds int64
	noShow                   float64
	session                  string
}

// register defines the capacity flags on fs.
func (c *capacityFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&c.maxActive, "max-active", 0, "create the program with this maxActiveUsers (0: no cap, and the other capacity flags do not apply)")
	fs.Float64Var(&c.noShow, "no-show", 0, "with -max-active: fraction of users, in [0, 1), who stop polling right before their admission and never see it (drawn by -seed)")
	fs.Int64Var(&c.noShowSeconds, "no-show-seconds", 0, "with -max-active: the program's noShowSeconds, 5 to 3600 (0: the server's default, the admission window)")
	fs.StringVar(&c.session, "session", "", "with -max-active: MIN-MAX, e.g. 5s-20s: a user who sees ADMITTED has its session ended with the pass (DELETE …/session) after a uniform random time in that range (default 0s-0s)")
}

// capacity returns the crowd the flags describe, nil without -max-active.
func (c *capacityFlags) capacity() (*loadtest.Capacity, error) {
	if c.maxActive == 0 {
		if c.noShow != 0 || c.noShowSeconds != 0 || c.session != "" {
			return nil, errors.New("-no-show, -no-show-seconds and -session need -max-active")
		}
		return nil, nil
	}
	out := &loadtest.Capacity{MaxActive: c.maxActive, NoShow: c.noShow, NoShowSeconds: c.noShowSeconds}
	if c.session != "" {
		lo, hi, ok := strings.Cut(c.session, "-")
		var err1, err2 error
		out.SessionMin, err1 = time.ParseDuration(lo)
		out.SessionMax, err2 = time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("-session %q: want MIN-MAX, e.g. 5s-20s", c.session)
		}
	}
	return out, out.Validate()
}
