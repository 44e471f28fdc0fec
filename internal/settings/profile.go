package settings

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/example/waitingroom/internal/api"
)

// Profile is what a program shows the people who wait, and where it sends
// them once admitted; every field is optional.
type Profile struct {
	DisplayName string `json:"displayName,omitempty" dynamodbav:"displayName,omitempty"`
	Message     string `json:"message,omitempty" dynamodbav:"message,omitempty"`
	Notice      string `json:"notice,omitempty" dynamodbav:"notice,omitempty"`
	TargetURL   string `json:"targetUrl,omitempty" dynamodbav:"targetUrl,omitempty"`
	// Translations are the texts in other languages (In picks them).
	Translations Translations `json:"translations,omitempty" dynamodbav:"translations,omitempty"`
}

// plainText accepts valid UTF-8 of at most max characters without
// hiddenChar (but line breaks when lines).
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

// hiddenChar reports whether r is Cc, Cf, Zl or Zp, but for the zero width
// (non-)joiner, which emoji and several scripts need.
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
	case SecureURL(u):
		return nil
	}
	return fmt.Errorf("must use https (http only for localhost)")
}

// SecureURL reports whether u is https, or http on a loopback host (a local demo).
func SecureURL(u *url.URL) bool {
	host := u.Hostname()
	return u.Scheme == "https" || u.Scheme == "http" && (strings.EqualFold(host, "localhost") || net.ParseIP(host).IsLoopback())
}

// changeProfile applies set's profile texts to p; "" clears one.
func changeProfile(p *Profile, set api.ProgramSettings) error {
	return cmp.Or(
		change(&p.DisplayName, set.DisplayName, "displayName", displayNameRule),
		change(&p.Message, set.Message, "message", messageRule),
		change(&p.Notice, set.Notice, "notice", noticeRule),
		change(&p.TargetURL, set.TargetURL, "targetUrl", profileText(checkTargetURL)),
		changeTranslations(&p.Translations, set.Translations),
	)
}

// profileText is the rule of a profile text: "" or a value check accepts.
func profileText(check func(string) error) func(string) (string, string) {
	return func(v string) (string, string) {
		if v == "" {
			return v, ""
		}
		if err := check(v); err != nil {
			return "", err.Error()
		}
		return v, ""
	}
}
