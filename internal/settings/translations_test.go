package settings_test

import (
	"testing"

	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/settings"
)

// TestProfileIn: the texts of the best matching language, each falling
// back to the untranslated one; the untranslated ones when no translation
// matches well.
func TestProfileIn(t *testing.T) {
	p := settings.Profile{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out",
		Translations: settings.Translations{"ko": {DisplayName: "갈라", Notice: "매진"}, "en-US": {Notice: "Sold out!"}, "zh-Hant": {Notice: "售完"}}}
	for _, tc := range []struct {
		prefs string
		want  settings.Texts
	}{
		{"", settings.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out"}},
		{"ko", settings.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"ko-KR", settings.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"fr, ko;q=0.5", settings.Texts{DisplayName: "갈라", Message: "Two nights.", Notice: "매진"}},
		{"en-GB", settings.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out!"}},
		{"zh-TW", settings.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "售完"}},
		{"fr", settings.Texts{DisplayName: "Gala", Message: "Two nights.", Notice: "Sold out"}},
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
