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

// TestProfileFieldsCoverProfile: every Profile field is in ProfileFields
// under its JSON name, so the admin API and the stores carry it.
func TestProfileFieldsCoverProfile(t *testing.T) {
	typ := reflect.TypeFor[queue.Profile]()
	var tags []string
	for f := range typ.Fields() {
		tags = append(tags, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	var names []string
	for _, f := range queue.ProfileFields {
		names = append(names, f.Name)
		var p queue.Profile
		*f.Field(&p) = "x"
		if got := reflect.ValueOf(p).FieldByIndex(fieldIndex(t, typ, f.Name)).String(); got != "x" {
			t.Errorf("ProfileFields[%s] sets another field", f.Name)
		}
	}
	if d := cmp.Diff(tags, names); d != "" {
		t.Errorf("ProfileFields names differ from Profile's JSON names (-tags +names):\n%s", d)
	}
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
		_, _, err := svc.PutProgram(context.Background(), "gala", queue.Settings{Profile: map[string]string{tc.field: tc.value}})
		var qe *queue.Error
		if tc.ok && err != nil || !tc.ok && (!errors.As(err, &qe) || qe.Code != api.CodeInvalidSettings) {
			t.Errorf("%s=%.40q: %v, want ok=%v", tc.field, tc.value, err, tc.ok)
		}
	}
}

func TestProfileSetClearAndNotice(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	set := map[string]string{"displayName": "Gala", "message": "Both nights.", "notice": "Saturday is sold out", "targetUrl": "https://tickets.example.com/"}
	c, _, err := svc.PutProgram(ctx, "gala", queue.Settings{Profile: set, Paused: ptr(true)})
	want := queue.Profile{DisplayName: "Gala", Message: "Both nights.", Notice: "Saturday is sold out", TargetURL: "https://tickets.example.com/"}
	if err != nil || !cmp.Equal(c.Profile, want) {
		t.Fatalf("PutProgram = %+v, %v; want profile %+v", c.Profile, err, want)
	}
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil || w.Notice != want.Notice {
		t.Fatalf("waiting view = %+v, %v; want the notice", w, err)
	}
	// Other fields stay when one is cleared.
	c, _, err = svc.PutProgram(ctx, "gala", queue.Settings{Profile: map[string]string{"notice": ""}})
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
	set := map[string]string{"displayName": "Gala", "message": "Both nights.", "targetUrl": "https://tickets.example.com/"}
	if _, _, err := svc.PutProgram(ctx, "gala", queue.Settings{Profile: set, AdmissionRatePerSecond: ptr(0.01), Paused: ptr(false)}); err != nil {
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

	c2, _, err := svc.PutProgram(ctx, "gala", queue.Settings{Paused: ptr(true), Closed: ptr(true)})
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
