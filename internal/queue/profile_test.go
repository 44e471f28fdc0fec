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
)

// TestProfileSettingsCoverProfile: every Profile text is set by the
// settings' field of the same JSON name, so the admin API and the stores
// carry it (the translations: TestTranslationsMerge).
func TestProfileSettingsCoverProfile(t *testing.T) {
	typ := reflect.TypeFor[queue.Profile]()
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
		{"targetUrl", "https://" + strings.Repeat("a", queue.MaxTargetURLLen) + ".com/", false},
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
	want := queue.Profile{DisplayName: "Gala", Message: "Both nights.", Notice: "Saturday is sold out", TargetURL: "https://tickets.example.com/"}
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
	want := queue.Showing{Profile: queue.Profile{DisplayName: "Gala", Message: "Both nights.", TargetURL: "https://tickets.example.com/"}}
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
