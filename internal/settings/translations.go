package settings

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/api"
)

// Texts are a program's texts to the people who wait, in one language.
type Texts struct {
	DisplayName string `json:"displayName,omitempty" dynamodbav:"displayName,omitempty"`
	Message     string `json:"message,omitempty" dynamodbav:"message,omitempty"`
	Notice      string `json:"notice,omitempty" dynamodbav:"notice,omitempty"`
}

// Translations are a program's texts by canonical BCP 47 tag.
type Translations map[string]Texts

// Bounds of a program's translations.
const (
	MaxTranslations = 10 // languages
	maxLanguageTag  = 35 // characters of a language key (RFC 5646's minimum buffer)
)

// The rules of the texts, translated or not.
var (
	displayNameRule = profileText(plainText(80, false))
	messageRule     = profileText(plainText(500, true))
	noticeRule      = profileText(plainText(280, true))
)

// In returns p's texts in the language of prefs that best matches a
// translation, each text falling back to the untranslated one.
func (p Profile) In(prefs ...language.Tag) Texts {
	base := Texts{DisplayName: p.DisplayName, Message: p.Message, Notice: p.Notice}
	if len(p.Translations) == 0 || len(prefs) == 0 {
		return base
	}
	keys, m := matcherOf(p.Translations)
	_, i, conf := m.Match(prefs...)
	if conf < language.High {
		return base
	}
	t := p.Translations[keys[i]]
	return Texts{
		DisplayName: cmp.Or(t.DisplayName, base.DisplayName),
		Message:     cmp.Or(t.Message, base.Message),
		Notice:      cmp.Or(t.Notice, base.Notice),
	}
}

// matchers memoizes language.Matchers by their languages, up to maxMatchers.
var matchers struct {
	sync.Mutex
	m map[string]language.Matcher
}

const maxMatchers = 256

// matcherOf returns t's languages in order and a matcher over them.
func matcherOf(t Translations) ([]string, language.Matcher) {
	keys := slices.Sorted(maps.Keys(t))
	id := strings.Join(keys, " ")
	matchers.Lock()
	defer matchers.Unlock()
	if m, ok := matchers.m[id]; ok {
		return keys, m
	}
	tags := make([]language.Tag, len(keys))
	for i, k := range keys {
		tags[i] = language.Make(k)
	}
	if len(matchers.m) >= maxMatchers || matchers.m == nil {
		matchers.m = make(map[string]language.Matcher)
	}
	m := language.NewMatcher(tags)
	matchers.m[id] = m
	return keys, m
}

// ParseLanguage reads a BCP 47 tag of at most 35 characters naming a language.
func ParseLanguage(s string) (language.Tag, bool) {
	if s == "" || len(s) > maxLanguageTag {
		return language.Und, false
	}
	tag, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	if _, conf := tag.Base(); conf != language.Exact { // und, und-KR, x-private: no language named
		return language.Und, false
	}
	return tag, true
}

// changeTranslations merges set into *t per language and text ("" clears
// one); *t is replaced, never modified (it may be shared).
func changeTranslations(t *Translations, set map[string]api.TextSettings) error {
	if set == nil {
		return nil
	}
	out := maps.Clone(*t)
	if out == nil {
		out = Translations{}
	}
	seen := make(map[string]string, len(set))
	for _, key := range slices.Sorted(maps.Keys(set)) {
		tag, ok := ParseLanguage(key)
		if !ok {
			return &Error{Setting: "translations", Problem: fmt.Sprintf("keys must be BCP 47 language tags of at most %d characters, such as ko or pt-BR (got %q)", maxLanguageTag, key)}
		}
		lang := tag.String()
		if other, dup := seen[lang]; dup {
			return &Error{Setting: "translations", Problem: fmt.Sprintf("names %s twice (%q and %q)", lang, other, key)}
		}
		seen[lang] = key
		texts, s := out[lang], set[key]
		name := "translations." + key + "."
		if err := cmp.Or(
			change(&texts.DisplayName, s.DisplayName, name+"displayName", displayNameRule),
			change(&texts.Message, s.Message, name+"message", messageRule),
			change(&texts.Notice, s.Notice, name+"notice", noticeRule),
		); err != nil {
			return err
		}
		if texts == (Texts{}) {
			delete(out, lang)
		} else {
			out[lang] = texts
		}
	}
	if len(out) > MaxTranslations {
		return &Error{Setting: "translations", Problem: fmt.Sprintf("may hold at most %d languages (it would hold %d): clear one first with \"\" for each of its texts", MaxTranslations, len(out))}
	}
	if len(out) == 0 {
		out = nil
	}
	*t = out
	return nil
}
