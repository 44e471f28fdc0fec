package queue

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/example/waitingroom/internal/api"
)

// Profile is what a program shows the people who wait, and where it sends
// them once admitted. Every field is optional text that the admin sets and
// clears ("").
type Profile struct {
	DisplayName string `json:"displayName,omitempty"`
	Message     string `json:"message,omitempty"`
	Notice      string `json:"notice,omitempty"`
	TargetURL   string `json:"targetUrl,omitempty"`
}

// ProfileField is one field of Profile: its JSON and DynamoDB name, the
// field itself, and its rule.
type ProfileField struct {
	Name  string
	Field func(p *Profile) *string
	// Check returns why v is not a valid value, nil if it is ("" always is).
	Check func(v string) error
}

// ProfileFields lists Profile's fields: adding one here, and to Profile, is
// all it takes for the admin API, the stores and the counters to carry it.
var ProfileFields = []ProfileField{
	{"displayName", func(p *Profile) *string { return &p.DisplayName }, plainText(80, false)},
	{"message", func(p *Profile) *string { return &p.Message }, plainText(500, true)},
	{"notice", func(p *Profile) *string { return &p.Notice }, plainText(280, true)},
	{"targetUrl", func(p *Profile) *string { return &p.TargetURL }, checkTargetURL},
}

// plainText accepts valid UTF-8 of at most max characters without control
// characters (line breaks too, unless lines) nor invisible format ones
// (hiddenChar).
func plainText(max int, lines bool) func(string) error {
	return func(v string) error {
		if !utf8.ValidString(v) {
			return fmt.Errorf("must be UTF-8 text")
		}
		if n := utf8.RuneCountInString(v); n > max {
			return fmt.Errorf("must be at most %d characters (got %d)", max, n)
		}
		for _, r := range v {
			if hiddenChar(r) && !(lines && r == '\n') {
				return fmt.Errorf("must be plain text without control or bidirectional formatting characters (%U)", r)
			}
		}
		return nil
	}
}

// hiddenChar reports whether r is a control character (Cc), a format one
// (Cf: the bidirectional marks, embeddings, overrides and isolates, zero
// width spaces, the byte order mark…) or a line or paragraph separator,
// all of which can make text read otherwise than it is. The zero width
// (non-)joiner, which emoji and several scripts need, is accepted.
func hiddenChar(r rune) bool {
	if r == '\u200C' || r == '\u200D' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// MaxTargetURLLen bounds a program's target URL.
const MaxTargetURLLen = 2048

// checkTargetURL accepts an absolute https URL without credentials or
// fragment; http only for a loopback host (a local demo).
func checkTargetURL(v string) error {
	if len(v) > MaxTargetURLLen {
		return fmt.Errorf("must be at most %d bytes", MaxTargetURLLen)
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "" || strings.ContainsAny(v, " \t\r\n\\"):
		return fmt.Errorf("must be an absolute URL such as https://tickets.example.com/buy")
	case u.User != nil:
		return fmt.Errorf("must not carry credentials")
	case u.Fragment != "" || strings.Contains(v, "#"):
		return fmt.Errorf("must not have a fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("must use https (http only for localhost)")
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// changeProfile applies change (ProfileFields' names to values) to p,
// each value checked by its field's rule.
func changeProfile(p *Profile, change map[string]string) error {
	for _, f := range ProfileFields {
		v, ok := change[f.Name]
		if !ok {
			continue
		}
		if v != "" {
			if err := f.Check(v); err != nil {
				return invalidSetting(f.Name, err.Error())
			}
		}
		*f.Field(p) = v
	}
	for name := range change {
		if !isProfileField(name) {
			return Errorf(KindInvalid, api.CodeInvalidSettings, "Unknown profile field %.64q.", name)
		}
	}
	return nil
}

func isProfileField(name string) bool {
	for _, f := range ProfileFields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// Showing is what anyone may see of a program: its profile, and whether
// admission is paused and new entries closed. It carries no counts.
type Showing struct {
	Profile Profile
	// Paused reports whether admission is paused now (a scheduled change
	// counts once it takes effect).
	Paused bool
	Closed bool
}

// Showing returns what programID shows the people who wait (the
// waiting-room page), read through the program cache as a poll reads it.
func (s *Service) Showing(ctx context.Context, programID string) (Showing, error) {
	if !ValidProgramID(programID) {
		return Showing{}, errInvalidProgramID()
	}
	now := s.clock.Now()
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return Showing{}, err
	}
	return Showing{Profile: p.Profile, Paused: p.Segment(now).Paused, Closed: p.Closed}, nil
}
