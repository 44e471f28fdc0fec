package waitpage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// textJSON is every text of the page, by language, for the server and app.js alike.
//
//go:embed web/text.json
var textJSON []byte

// fallbackLang is the language of a request that asks for none we have.
const fallbackLang = "en"

// language is one entry of the text table.
type language struct {
	code  string
	texts map[string]string
}

// text is the table by language code.
var text = mustParseText(textJSON)

func mustParseText(b []byte) map[string]language {
	var raw map[string]map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		panic(fmt.Sprintf("waitpage: web/text.json: %v", err))
	}
	if _, ok := raw[fallbackLang]; !ok {
		panic("waitpage: web/text.json has no " + fallbackLang)
	}
	out := make(map[string]language, len(raw))
	for code, texts := range raw {
		out[code] = language{code: code, texts: texts}
	}
	return out
}

// t returns the text of key (from English when l lacks it), each {name} replaced by the
// value following it in args.
func (l language) t(key string, args ...string) string {
	s, ok := l.texts[key]
	if !ok {
		s = text[fallbackLang].texts[key]
	}
	for i := 0; i+1 < len(args); i += 2 {
		s = strings.ReplaceAll(s, "{"+args[i]+"}", args[i+1])
	}
	return s
}

// requestLang chooses r's language: ?lang=, else the first Accept-Language range we have.
func requestLang(r *http.Request) language {
	if l, ok := tableLang(r.URL.Query().Get("lang")); ok {
		return l
	}
	for part := range strings.SplitSeq(r.Header.Get("Accept-Language"), ",") {
		tag, _, _ := strings.Cut(part, ";")
		if l, ok := tableLang(tag); ok {
			return l
		}
	}
	return text[fallbackLang]
}

// tableLang is the table's language for the BCP 47 tag s, by its primary language subtag
// in any case: KO, ko-KR and ko_kr are ko.
func tableLang(s string) (language, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "-_"); i >= 0 {
		s = s[:i]
	}
	l, ok := text[strings.ToLower(s)]
	return l, ok
}

// number formats n with thousands separators.
func number(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// wait says an estimated wait in words, as app.js does: "about 4 min", or "not known yet".
func (l language) wait(d time.Duration) string {
	switch {
	case d <= 0:
		return l.t("notKnownYet")
	case d < time.Minute:
		return l.t("lessThanMinute")
	case d < time.Hour:
		return l.t("about", "d", l.t("minutes", "n", number(int64(math.Round(d.Minutes())))))
	}
	halves := math.Round(d.Hours() * 2)
	n := strconv.FormatFloat(halves/2, 'f', -1, 64)
	return l.t("about", "d", l.t("hours", "n", n))
}

// clock formats a time for the server-rendered page, in UTC.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
