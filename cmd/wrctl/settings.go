package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/example/waitingroom/internal/api"
)

// setting is one program setting of the admin API: the put flag that sets
// it, its JSON field, and how the flag's text becomes its value.
type setting struct {
	flag  string
	field string
	kind  kind
	usage string
}

// settingFlags names and explains the put flag of each field of
// api.ProgramSettings, by JSON name. A field without an entry gets a flag
// named after it in kebab case, parsed by its Go type.
var settingFlags = map[string]setting{
	"admissionRatePerSecond": {"rate", "", number, "admission `rate`, people per second (0: manual admission only)"},
	"paused":                 {"paused", "", boolean, "stop admission (-paused=false restarts it)"},
	"closed":                 {"closed", "", boolean, "stop new entries; people waiting keep their place (-closed=false reopens)"},
	"admissionWindowSeconds": {"window", "", seconds, "how long an admitted person has to reach the site, a `duration` in whole seconds (10m, or 600)"},
	"pollingPolicy":          {"policy", "", text, "polling `policy`: tiers, eta, steady, or \"\" for the service's default"},
	"targetUrl":              {"target-url", "", text, "where admitted people go, an https `URL` (http only for loopback)"},
	"displayName":            {"display-name", "", text, "the program's `name` on the waiting-room page"},
	"message":                {"message", "", text, "a `message` on the waiting-room page"},
	"notice":                 {"notice", "", text, "a `notice` to people waiting, 280 characters at most (\"\" clears it)"},
	"opensAt":                {"opens-at", "", instant, "when admission starts: RFC 3339 `time` (2026-12-01T10:00:00+09:00) or +DURATION from now (+15m); \"\" clears it"},
	"closesAt":               {"closes-at", "", instant, "when new entries stop, after -opens-at: RFC 3339 `time` or +DURATION from now; people waiting keep their place; \"\" clears it"},
	"shuffleAtOpen":          {"shuffle-at-open", "", boolean, "place everyone who entered before -opens-at in a random order at the opening"},
	"maxWaiting":             {"max-waiting", "", integer, "the longest the line may be, in `people` waiting: enters beyond get QUEUE_FULL (0: no limit)"},
	"maxActiveUsers":         {"max-active", "", integer, "the most `people` admitted at once; set before admission starts, then only raised (0: no cap)"},
	"translations":           {"text", "", texts, "a text in another language, `LANG.TEXT=VALUE` with TEXT displayName, message or notice (ko.notice=…; ko.notice= clears it); repeat it for more"},
	"noShowSeconds":          {"no-show", "", seconds, "how long an admitted person has to fetch their pass before they are a no-show, a `duration` of 5s to 1h (0: none)"},
	"challengeBits":          {"challenge-bits", "", integer, "the proof of work every enter must carry, in leading zero `bits` of a hash, 0 to 26 (0: none)"},
}

// programSettings is every program setting put knows: one per field of
// api.ProgramSettings.
var programSettings = settingsOf(reflect.TypeFor[api.ProgramSettings](), settingFlags)

// settingsOf returns a setting for each JSON field of the struct t, as
// named by named or else after the field.
func settingsOf(t reflect.Type, named map[string]setting) []setting {
	var out []setting
	for f := range t.Fields() {
		field, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if field == "" || field == "-" {
			continue
		}
		s, ok := named[field]
		if !ok {
			s = setting{flag: kebab(field), kind: kindOf(f.Type.Elem()), usage: "the program's `" + field + "`"}
		}
		s.field = field
		out = append(out, s)
	}
	return out
}

// kebab turns a JSON field name into a flag name: targetUrl, target-url.
func kebab(field string) string {
	var b strings.Builder
	for _, r := range field {
		if unicode.IsUpper(r) {
			b.WriteByte('-')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kindOf is how a flag reads a value of type t.
func kindOf(t reflect.Type) kind {
	switch t.Kind() {
	case reflect.Bool:
		return boolean
	case reflect.Float32, reflect.Float64:
		return number
	case reflect.Int, reflect.Int32, reflect.Int64:
		return integer
	}
	return text
}

// kind is how a setting's flag value becomes its JSON value.
type kind int

const (
	text kind = iota
	number
	integer
	boolean
	seconds
	instant
	texts // repeated LANG.TEXT=VALUE, merged into one translations map
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
	case texts:
		return v.setText(s)
	case text:
		v.value = s
	case number:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return errors.New("not a number")
		}
		v.value = f
	case integer:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return errors.New("not a whole number")
		}
		v.value = n
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

// setText adds one LANG.TEXT=VALUE to the translations being set, a JSON
// object by language and text; the server checks LANG.
func (v *settingValue) setText(s string) error {
	key, value, ok := strings.Cut(s, "=")
	lang, name, dot := strings.Cut(key, ".")
	if !ok || !dot || lang == "" || !slices.Contains([]string{"displayName", "message", "notice"}, name) {
		return errors.New("want LANG.TEXT=VALUE with TEXT displayName, message or notice, e.g. ko.notice=토요일 매진")
	}
	m, _ := v.value.(map[string]map[string]string)
	if m == nil {
		m = map[string]map[string]string{}
		v.value = m
	}
	if m[lang] == nil {
		m[lang] = map[string]string{}
	}
	m[lang][name] = value
	return nil
}

// registerSettings registers the put flags on fs; the returned function
// gives the settings of the flags given on the command line, and only
// those.
func registerSettings(fs *flag.FlagSet, now func() time.Time) func() (api.ProgramSettings, error) {
	values := map[string]*settingValue{} // by JSON field
	for _, s := range programSettings {
		values[s.field] = &settingValue{kind: s.kind, now: now}
		fs.Var(values[s.field], s.flag, s.usage+" ("+s.field+")")
	}
	return func() (api.ProgramSettings, error) {
		given := map[string]any{}
		for field, v := range values {
			if v.value != nil {
				given[field] = v.value
			}
		}
		var set api.ProgramSettings
		b, err := json.Marshal(given)
		if err == nil {
			err = json.Unmarshal(b, &set)
		}
		return set, err
	}
}

// flagOf is the put flag that sets JSON field, "" if none.
func flagOf(field string) string {
	for _, s := range programSettings {
		if s.field == field {
			return s.flag
		}
	}
	return ""
}
