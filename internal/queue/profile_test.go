package queue_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// TestProfileSettingsCoverProfile: every Profile text is set by the
// settings' field of the same JSON name, so the admin API and the stores
// carry it (the translations: TestTranslationsMerge).
func TestProfileSettingsCoverProfile(t *testing.T) {
	typ := reflect.TypeFor[settings.Profile]()
	texts := map[string]string{}
	for f := range typ.Fields() {
		if f.Type.Kind() != reflect.String {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		texts[name] = "https://tickets.example.com/" + name
	}
	svc, _ := newService(t)
	c, _, err := svc.PutProgram(t.Context(), "gala", profileSet(t, texts))
	if err != nil {
		t.Fatal(err)
	}
	for f := range typ.Fields() {
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Type.Kind() != reflect.String {
			continue
		}
		if got := reflect.ValueOf(c.Profile).FieldByIndex(f.Index).String(); got != texts[name] {
			t.Errorf("Profile.%s = %q after setting %s to %q", f.Name, got, name, texts[name])
		}
	}
}

// profileSet is the settings that set the profile texts named by their
// JSON names.
func profileSet(t *testing.T, texts map[string]string) api.ProgramSettings {
	var set api.ProgramSettings
	v := reflect.ValueOf(&set).Elem()
	for name, text := range texts {
		v.FieldByIndex(fieldIndex(t, v.Type(), name)).Set(reflect.ValueOf(&text))
	}
	return set
}

func fieldIndex(t *testing.T, typ reflect.Type, jsonName string) []int {
	for f := range typ.Fields() {
		if strings.Split(f.Tag.Get("json"), ",")[0] == jsonName {
			return f.Index
		}
	}
	t.Fatalf("no field %s", jsonName)
	return nil
}

func TestProfileValidation(t *testing.T) {
	for _, tc := range []struct {
		field, value string
		ok           bool
	}{
		{"targetUrl", "https://tickets.example.com/buy?event=gala", true},
		{"targetUrl", "http://127.0.0.1:3000/demo-site/demo", true},
		{"targetUrl", "http://localhost:8080/", true},
		{"targetUrl", "http://[::1]:8080/in", true},
		{"targetUrl", "http://tickets.example.com/", false},
		{"targetUrl", "https://user:pw@tickets.example.com/", false},
		{"targetUrl", "https://tickets.example.com/#frag", false},
		{"targetUrl", "javascript:alert(1)", false},
		{"targetUrl", "/relative/path", false},
		{"targetUrl", "//tickets.example.com/", false},
		{"targetUrl", "ftp://tickets.example.com/", false},
		{"targetUrl", "https://tickets.example.com/a b", false},
		{"targetUrl", "https://" + strings.Repeat("a", settings.MaxTargetURLLen) + ".com/", false},
		{"displayName", "Gala — 갈라 2026", true},
		{"displayName", strings.Repeat("가", 80), true},
		{"displayName", strings.Repeat("가", 81), false},
		{"displayName", "two\nlines", false},
		{"message", "two\nlines", true},
		{"message", "bell\a", false},
		{"notice", strings.Repeat("n", 280), true},
		{"notice", strings.Repeat("n", 281), false},
		{"notice", "bad \xff utf-8", false},
		{"notice", "", true},
	} {
		svc, _ := newService(t)
		_, _, err := svc.PutProgram(context.Background(), "gala", profileSet(t, map[string]string{tc.field: tc.value}))
		var qe *queue.Error
		if tc.ok && err != nil || !tc.ok && (!errors.As(err, &qe) || qe.Code != api.CodeInvalidSettings) {
			t.Errorf("%s=%.40q: %v, want ok=%v", tc.field, tc.value, err, tc.ok)
		}
	}
}

func TestProfileSetClearAndNotice(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	texts := map[string]string{"displayName": "Gala", "message": "Both nights.", "notice": "Saturday is sold out", "targetUrl": "https://tickets.example.com/"}
	set := profileSet(t, texts)
	set.Paused = ptr(true)
	c, _, err := svc.PutProgram(ctx, "gala", set)
	want := settings.Profile{DisplayName: "Gala", Message: "Both nights.", Notice: "Saturday is sold out", TargetURL: "https://tickets.example.com/"}
	if err != nil || !cmp.Equal(c.Profile, want) {
		t.Fatalf("PutProgram = %+v, %v; want profile %+v", c.Profile, err, want)
	}
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil || w.Notice != want.Notice {
		t.Fatalf("waiting view = %+v, %v; want the notice", w, err)
	}
	// Other fields stay when one is cleared.
	c, _, err = svc.PutProgram(ctx, "gala", profileSet(t, map[string]string{"notice": ""}))
	want.Notice = ""
	if err != nil || !cmp.Equal(c.Profile, want) {
		t.Fatalf("after clearing the notice: %+v, %v; want %+v", c.Profile, err, want)
	}
	if v, err := svc.Poll(ctx, "gala", w.TokenID); err != nil || v.Notice != "" {
		t.Errorf("poll after clearing = %+v, %v; want no notice", v, err)
	}
}

// TestShowing: what the page may show follows the program (a pause once
// it takes effect) and the waiting view says paused too; bad and unknown
// ids answer the API's errors.
func TestShowing(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t, queue.WithProgramCache(time.Second))
	set := profileSet(t, map[string]string{"displayName": "Gala", "message": "Both nights.", "targetUrl": "https://tickets.example.com/"})
	set.AdmissionRatePerSecond, set.Paused = new(api.Rate(0.01)), ptr(false)
	if _, _, err := svc.PutProgram(ctx, "gala", set); err != nil {
		t.Fatal(err)
	}
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil || w.Paused {
		t.Fatalf("enter = %+v, %v; want WAITING, not paused", w, err)
	}
	want := queue.Showing{Profile: settings.Profile{DisplayName: "Gala", Message: "Both nights.", TargetURL: "https://tickets.example.com/"}}
	if got, err := svc.Showing(ctx, "gala"); err != nil || !cmp.Equal(got, want) {
		t.Errorf("Showing = %+v, %v; want %+v", got, err, want)
	}

	c2, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: ptr(true), Closed: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(c2.EffectiveAt.Sub(c.Now())) // the pause takes effect; the cache entry is stale
	want.Paused, want.Closed = true, true
	if got, err := svc.Showing(ctx, "gala"); err != nil || !cmp.Equal(got, want) {
		t.Errorf("Showing once paused = %+v, %v; want %+v", got, err, want)
	}
	if v, err := svc.Poll(ctx, "gala", w.TokenID); err != nil || v.Status != queue.StatusWaiting || !v.Paused {
		t.Errorf("poll once paused = %+v, %v; want WAITING and paused", v, err)
	}

	for id, code := range map[string]string{"no such": api.CodeInvalidProgramID, "nobody": api.CodeProgramNotFound} {
		var qe *queue.Error
		if _, err := svc.Showing(ctx, id); !errors.As(err, &qe) || qe.Code != code {
			t.Errorf("Showing(%q) = %v, want %s", id, err, code)
		}
	}
}

// TestTranslationsMerge: a PUT's translations merge per language and per
// text, with canonical keys; "" clears a text, and a language left
// without texts goes away.
func TestTranslationsMerge(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	steps := []struct {
		name string
		set  map[string]api.TextSettings
		want settings.Translations
	}{
		{"create", map[string]api.TextSettings{"KO": {DisplayName: new("갈라"), Notice: new("토요일 매진")}, "pt_br": {Message: new("Duas noites.")}},
			settings.Translations{"ko": {DisplayName: "갈라", Notice: "토요일 매진"}, "pt-BR": {Message: "Duas noites."}}},
		{"one text of one language", map[string]api.TextSettings{"ko": {Message: new("이틀 밤")}},
			settings.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤", Notice: "토요일 매진"}, "pt-BR": {Message: "Duas noites."}}},
		{"clear a text", map[string]api.TextSettings{"ko": {Notice: new("")}},
			settings.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}, "pt-BR": {Message: "Duas noites."}}},
		{"clear a language's last text", map[string]api.TextSettings{"pt-BR": {Message: new("")}},
			settings.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}}},
		{"no translations: kept", nil,
			settings.Translations{"ko": {DisplayName: "갈라", Message: "이틀 밤"}}},
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
