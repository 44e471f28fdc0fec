package settings

import (
	"fmt"
	"strings"
	"time"
)

// Edge is a program at the edge gate: its mode, the site's paths it
// guards, how long an edge session lasts, and the break-glass.
type Edge struct {
	Mode           string    `dynamodbav:"edgeMode,omitempty"`
	Paths          []string  `dynamodbav:"edgePaths,omitempty"`
	SessionSeconds int64     `dynamodbav:"edgeSessionSeconds,omitempty"`
	FailOpenUntil  time.Time `dynamodbav:"-"`
}

// Edge modes.
const (
	EdgeOff     = "off"
	EdgeStandby = "standby"
	EdgeOn      = "on"
)

// Bounds of the edge settings.
const (
	MaxEdgePaths          = 10
	MaxEdgePathLen        = 128
	DefaultEdgeSession    = time.Hour
	MinEdgeSessionSeconds = 60
	MaxEdgeSessionSeconds = 86_400
)

// SessionLength is how long an edge session of the program lasts.
func (e Edge) SessionLength() time.Duration {
	if e.SessionSeconds == 0 {
		return DefaultEdgeSession
	}
	return time.Duration(e.SessionSeconds) * time.Second
}

var edgeSession = bounded(MinEdgeSessionSeconds, MaxEdgeSessionSeconds, "must be 0 (the default, 3600) or %d to %d")

func edgeMode(m string) (string, string) {
	switch m {
	case EdgeOff:
		return "", ""
	case EdgeStandby, EdgeOn:
		return m, ""
	}
	return "", fmt.Sprintf("must be %q, %q or %q", EdgeOff, EdgeStandby, EdgeOn)
}

// edgePaths accepts at most MaxEdgePaths distinct prefixes, each an absolute
// path of printable ASCII without query, fragment or backslash.
func edgePaths(paths []string) ([]string, string) {
	if len(paths) > MaxEdgePaths {
		return nil, fmt.Sprintf("must hold at most %d paths", MaxEdgePaths)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		bad := !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || len(p) > MaxEdgePathLen || seen[p] ||
			strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r > '~' || strings.ContainsRune(`?#\%`, r) })
		if bad {
			return nil, fmt.Sprintf("must be distinct paths starting with one /, of at most %d printable ASCII characters without ? # %% or \\ (got %q)", MaxEdgePathLen, p)
		}
		seen[p] = true
	}
	if len(paths) == 0 {
		return nil, ""
	}
	return paths, ""
}

// failOpenUntil reads the break-glass's end, kept to the second in UTC.
func failOpenUntil(v string) (time.Time, string) {
	t, ok := ParseOpening(v)
	if !ok {
		return t, strings.Replace(openingProblem, "e.g.", "the end of the break-glass, e.g.", 1)
	}
	return t.UTC().Truncate(time.Second), ""
}
