package queue_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// TestTranslationsMerge: a PUT's translations merge per language and per
// text, with canonical keys; "" clears a text, and a language left
// without texts goes away.
func TestTranslationsMerge(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	steps := []struct {
		name string
		set  map[string]api.TextSettings
		want queue.Translations
	}{
		{"create", map[string]api.TextSettings{"KO": {DisplayName: new("갈라"), Notice: new("토요일 매진")}, "pt_br": {Message: new("Duas noites.")}},
			queue.Translations{"ko": {DisplayName: "갈라", Notice: "토요일 매진"}, "pt-BR": {Message: "Duas noites."}}},
		{"one text of one language", map[string]api.TextSettings{"ko": {Message: new("이틀 밤")}},
			queue.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤", Notice: "토요일 매진"}, "pt-BR": {Message: "Duas noites."}}},
		{"clear a text", map[string]api.TextSettings{"ko": {Notice: new("")}},
			queue.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}, "pt-BR": {Message: "Duas noites."}}},
		{"clear a language's last text", map[string]api.TextSettings{"pt-BR": {Message: new("")}},
			queue.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}}},
		{"no translations: kept", nil,
			queue.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}}},
		{"clear the last language", map[string]api.TextSettings{"ko": {DisplayName: new(""), Message: new("")}}, nil},
	}
	for _, s := range steps {
		c, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Translations: s.set})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d := cmp.Diff(s.want, c.Profile.Translations); d != "" {
			t.Errorf("%s: translations (-want +got):\n%s", s.name, d)
		}
		stored, err := svc.Program(ctx, "gala")
		if err != nil || !cmp.Equal(stored.Profile.Translations, c.Profile.Translations) {
			t.Errorf("%s: read back %v %v, want the answer's", s.name, stored.Profile.Translations, err)
		}
	}
}

// TestTranslationsRules: keys must be language tags, named once; each text
// follows the untranslated one's rule; at most MaxTranslations languages.
func TestTranslationsRules(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	many := map[string]api.TextSettings{}
	for _, lang := range []string{"ko", "ja", "zh-Hant", "zh-Hans", "fr", "de", "es", "pt-BR", "it", "nl"} {
		many[lang] = api.TextSettings{Notice: new(lang)}
	}
	if _, _, err := svc.PutProgram(ctx, "full", api.ProgramSettings{Translations: many}); err != nil {
		t.Fatalf("%d languages: %v", len(many), err)
	}
	for _, tc := range []struct {
		name, id string
		set      map[string]api.TextSettings
		problem  string
	}{
		{"not a tag", "p", map[string]api.TextSettings{"korean!": {Notice: new("x")}}, "BCP 47"},
		{"undetermined", "p", map[string]api.TextSettings{"und": {Notice: new("x")}}, "BCP 47"},
		{"too long", "p", map[string]api.TextSettings{"en-" + strings.Repeat("a1b2c3d4-", 4): {Notice: new("x")}}, "BCP 47"},
		{"named twice", "p", map[string]api.TextSettings{"ko": {Notice: new("a")}, "KO": {Message: new("b")}}, "twice"},
		{"a notice too long", "p", map[string]api.TextSettings{"ko": {Notice: new(strings.Repeat("가", 281))}}, "translations.ko.notice must be at most 280"},
		{"a display name on two lines", "p", map[string]api.TextSettings{"ko": {DisplayName: new("a\nb")}}, "translations.ko.displayName"},
		{"a hidden character", "p", map[string]api.TextSettings{"ko": {Message: new("a\u202Eb")}}, "translations.ko.message"},
		{"an eleventh language", "full", map[string]api.TextSettings{"sv": {Notice: new("x")}}, "at most 10 languages"},
	} {
		_, _, err := svc.PutProgram(ctx, tc.id, api.ProgramSettings{Translations: tc.set})
		if codeOf(err) != api.CodeInvalidSettings || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("%s: %v, want INVALID_SETTINGS with %q", tc.name, err, tc.problem)
		}
	}
	// Replacing a language by another in one PUT stays within the bound.
	swap := map[string]api.TextSettings{"nl": {Notice: new("")}, "sv": {Notice: new("sv")}}
	if _, _, err := svc.PutProgram(ctx, "full", api.ProgramSettings{Translations: swap}); err != nil {
		t.Errorf("swap a language at the bound: %v", err)
	}
}

// TestProfileIn: the texts of the best matching language, each falling
// back to the untranslated one; the untranslated ones when no translation
// matches well.
func TestProfileIn(t *testing.T) {
	p := queue.Profile{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out",
		Translations: queue.Translations{"ko": {DisplayName: "갈라", Notice: "매진"}, "en-US": {Notice: "Sold out!"}, "zh-Hant": {Notice: "售完"}}}
	for _, tc := range []struct {
		prefs string
		want  queue.Texts
	}{
		{"", queue.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out"}},
		{"ko", queue.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"ko-KR", queue.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"fr, ko;q=0.5", queue.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"en-GB", queue.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out!"}},
		{"zh-TW", queue.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "售完"}},
		{"fr", queue.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out"}},
	} {
		prefs, _, err := language.ParseAcceptLanguage(tc.prefs)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.In(prefs...); got != tc.want {
			t.Errorf("In(%q) = %+v, want %+v", tc.prefs, got, tc.want)
		}
	}
}
