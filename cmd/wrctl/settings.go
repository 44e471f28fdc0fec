package main

import (
	"encoding/json"
	"errors"
	"flag"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// setting is a program setting: the put flag that sets it, its JSON field, and how the flag's text becomes its value.
type setting struct {
	flag  string
	field string
	kind  kind
	usage string
}

// settingFlags names and explains the put flag of api.ProgramSettings's fields, by JSON name; a
// field without an entry gets a flag named after it in kebab case, parsed by its Go type.
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
	"pushLeadSeconds":        {"push-lead", "", seconds, "how long before their turn a person subscribed to push is told to get ready, a `duration` of 30s to 30m (0: 2m)"},
	"enqueueJwksUrl":         {"enqueue-jwks", "", text, "the site's JWKS of enqueue token keys, an https `URL` (http only for loopback); \"\" clears it"},
	"enqueueIssuer":          {"enqueue-issuer", "", text, "the `iss` of the site's enqueue tokens; \"\" clears it"},
	"requireEnqueueToken":    {"require-enqueue-token", "", boolean, "every enter must carry the site's enqueue token: one place per account (-require-enqueue-token=false lifts it)"},
	"noShowSeconds":          {"no-show", "", seconds, "how long an admitted person has to fetch their pass before they are a no-show, a `duration` of 5s to 1h (0: none)"},
	"challengeBits":          {"challenge-bits", "", integer, "the proof of work every enter must carry, in leading zero `bits` of a hash, 0 to 26 (0: none)"},
	"edgeMode":               {"edge-mode", "", text, "the program at the edge gate: off (it lets everyone through), standby (it gives everyone an edge session) or on (it queues those without one)"},
	"edgePaths":              {"edge-paths", "", list, "the site's `paths` the edge gate guards for the program, comma-separated prefixes (/tickets/,/cart); \"\" clears them"},
	"edgeSessionSeconds":     {"edge-session", "", seconds, "how long an edge session lasts, a `duration` of 1m to 24h (0: the default, 1h)"},
	"failOpenUntil":          {"fail-open-until", "", instant, "the break-glass: the edge gate and passverify let everyone through until this RFC 3339 `time` or +DURATION from now; \"\" ends it"},
}

// programSettings is every program setting put knows: one per field of api.ProgramSettings.
var programSettings = settingsOf(reflect.TypeFor[api.ProgramSettings](), settingFlags)

// settingsOf returns a setting for each JSON field of the struct t, as named by named or else after the field.
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

var upper = regexp.MustCompile(`[A-Z]`)

// kebab turns a JSON field name into a flag name: targetUrl, target-url.
func kebab(field string) string {
	return upper.ReplaceAllStringFunc(field, func(s string) string { return "-" + strings.ToLower(s) })
}

// kindOf is how a flag reads a value of type t: text unless a bool or a number.
func kindOf(t reflect.Type) kind {
	return map[reflect.Kind]kind{reflect.Bool: boolean, reflect.Float32: number, reflect.Float64: number,
		reflect.Int: integer, reflect.Int32: integer, reflect.Int64: integer}[t.Kind()]
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
	list  // comma-separated values ("" for none)
)

// parse reads s, a flag value of kind k, into its JSON value: prev is the
// value so far (texts add to it), now what +DURATION counts from.
func (k kind) parse(s string, prev any, now func() time.Time) (any, error) {
	switch k {
	case texts:
		return addText(prev, s)
	case list:
		if s == "" {
			return []string{}, nil
		}
		return strings.Split(s, ","), nil
	case number:
		f, err := strconv.ParseFloat(s, 64)
		return f, wrong(err != nil || math.IsInf(f, 0) || math.IsNaN(f), "not a number")
	case integer:
		n, err := strconv.ParseInt(s, 10, 64)
		return n, wrong(err != nil, "not a whole number")
	case boolean:
		b, err := strconv.ParseBool(s)
		return b, wrong(err != nil, "want true or false")
	case seconds:
		d, err := time.ParseDuration(s)
		if n, nerr := strconv.ParseInt(s, 10, 64); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err != nil {
			return nil, errors.New("want a duration (10m) or whole seconds (600)")
		}
		return int64(d / time.Second), wrong(d%time.Second != 0, "want whole seconds")
	case instant:
		if after, ok := strings.CutPrefix(s, "+"); ok {
			d, err := time.ParseDuration(after)
			return now().Add(d).UTC().Truncate(time.Second).Format(time.RFC3339), wrong(err != nil || d < 0, "want +DURATION, e.g. +15m")
		}
		if s == "" {
			return s, nil // clears it
		}
		t, err := time.Parse(time.RFC3339, s)
		return t.Format(time.RFC3339Nano), wrong(err != nil, "want an RFC 3339 time, e.g. 2026-12-01T10:00:00+09:00, or +DURATION")
	}
	return s, nil
}

// wrong is msg as an error when bad, else nil.
func wrong(bad bool, msg string) error {
	if bad {
		return errors.New(msg)
	}
	return nil
}

// addText adds LANG.TEXT=VALUE to translations, by language and text (nil: none yet); the server checks LANG.
func addText(translations any, s string) (any, error) {
	key, value, ok := strings.Cut(s, "=")
	lang, name, dot := strings.Cut(key, ".")
	if !ok || !dot || lang == "" || !slices.Contains([]string{"displayName", "message", "notice"}, name) {
		return nil, errors.New("want LANG.TEXT=VALUE with TEXT displayName, message or notice, e.g. ko.notice=토요일 매진")
	}
	m, _ := translations.(map[string]map[string]string)
	if m == nil {
		m = map[string]map[string]string{}
	}
	if m[lang] == nil {
		m[lang] = map[string]string{}
	}
	m[lang][name] = value
	return m, nil
}

// registerSettings registers the put flags on fs and returns the settings given by them, and only those.
func registerSettings(fs *flag.FlagSet, now func() time.Time) func() (api.ProgramSettings, error) {
	given := map[string]any{} // JSON values by field
	for _, s := range programSettings {
		set := func(v string) (err error) { // an error ends the command
			given[s.field], err = s.kind.parse(v, given[s.field], now)
			return err
		}
		define := either(s.kind == boolean, fs.BoolFunc, fs.Func) // BoolFunc: -paused for -paused=true
		define(s.flag, s.usage+" ("+s.field+")", set)
	}
	return func() (set api.ProgramSettings, err error) {
		b, err := json.Marshal(given)
		if err == nil {
			err = json.Unmarshal(b, &set)
		}
		return set, err
	}
}

// flagOf is the put flag that sets JSON field, "" if none.
func flagOf(field string) string {
	if i := slices.IndexFunc(programSettings, func(s setting) bool { return s.field == field }); i >= 0 {
		return programSettings[i].flag
	}
	return ""
}
