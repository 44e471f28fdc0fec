package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// setting is one program setting of the admin API: the put flag that sets
// it and its JSON field.
type setting struct {
	flag  string
	field string
	kind  kind
	usage string
}

// programSettings is every program setting put knows. Adding one to the
// admin API is adding one line here.
var programSettings = []setting{
	{"rate", "admissionRatePerSecond", number, "admission `rate`, people per second (0: manual admission only)"},
	{"paused", "paused", boolean, "stop admission (-paused=false restarts it)"},
	{"closed", "closed", boolean, "stop new entries; people waiting keep their place (-closed=false reopens)"},
	{"window", "admissionWindowSeconds", seconds, "how long an admitted person has to reach the site, a `duration` in whole seconds (10m, or 600)"},
	{"policy", "pollingPolicy", text, "polling `policy`: tiers, eta, or \"\" for the service's default"},
	{"target-url", "targetUrl", text, "where admitted people go, an https `URL` (http only for loopback)"},
	{"display-name", "displayName", text, "the program's `name` on the waiting-room page"},
	{"message", "message", text, "a `message` on the waiting-room page"},
	{"notice", "notice", text, "a `notice` to people waiting, 280 characters at most (\"\" clears it)"},
	{"opens-at", "opensAt", instant, "when admission starts: RFC 3339 `time` (2026-12-01T10:00:00+09:00) or +DURATION from now (+15m); \"\" clears it"},
	{"shuffle-at-open", "shuffleAtOpen", boolean, "place everyone who entered before -opens-at in a random order at the opening"},
}

// kind is how a setting's flag value becomes its JSON value.
type kind int

const (
	text kind = iota
	number
	boolean
	seconds
	instant
)

// settingValue is a setting's flag.Value; value is its JSON value once set.
type settingValue struct {
	kind  kind
	value any
	now   func() time.Time
}

func (v *settingValue) String() string {
	if v == nil || v.value == nil {
		return ""
	}
	return fmt.Sprint(v.value)
}

// IsBoolFlag lets "-paused" stand for "-paused=true".
func (v *settingValue) IsBoolFlag() bool { return v.kind == boolean }

func (v *settingValue) Set(s string) error {
	switch v.kind {
	case text:
		v.value = s
	case number:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return errors.New("not a number")
		}
		v.value = f
	case boolean:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("want true or false")
		}
		v.value = b
	case seconds:
		d, err := time.ParseDuration(s)
		if err != nil {
			n, nerr := strconv.ParseInt(s, 10, 64)
			if nerr != nil {
				return errors.New("want a duration (10m) or whole seconds (600)")
			}
			d = time.Duration(n) * time.Second
		}
		if d%time.Second != 0 {
			return errors.New("want whole seconds")
		}
		v.value = int64(d / time.Second)
	case instant:
		switch {
		case s == "":
			v.value = ""
		case strings.HasPrefix(s, "+"):
			d, err := time.ParseDuration(s[1:])
			if err != nil || d < 0 {
				return errors.New("want +DURATION, e.g. +15m")
			}
			v.value = v.now().Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
		default:
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return errors.New("want an RFC 3339 time, e.g. 2026-12-01T10:00:00+09:00, or +DURATION")
			}
			v.value = t.Format(time.RFC3339Nano)
		}
	}
	return nil
}

// settingFlags registers table's settings on fs; the returned function
// gives the JSON body of the flags given on the command line, and only
// those.
func settingFlags(fs *flag.FlagSet, table []setting, now func() time.Time) func() map[string]any {
	values := map[string]*settingValue{}
	for _, s := range table {
		v := &settingValue{kind: s.kind, now: now}
		values[s.flag] = v
		fs.Var(v, s.flag, s.usage+" ("+s.field+")")
	}
	return func() map[string]any {
		body := map[string]any{}
		fs.Visit(func(f *flag.Flag) {
			if v, ok := values[f.Name]; ok {
				body[fieldOf(table, f.Name)] = v.value
			}
		})
		return body
	}
}

func fieldOf(table []setting, flagName string) string {
	for _, s := range table {
		if s.flag == flagName {
			return s.field
		}
	}
	return ""
}

// flagOf is the put flag that sets JSON field, "" if none.
func flagOf(table []setting, field string) string {
	for _, s := range table {
		if s.field == field {
			return s.flag
		}
	}
	return ""
}
