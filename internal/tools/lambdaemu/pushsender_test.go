//go:build emulator

package lambdaemu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/lambdaemu"
	"github.com/example/waitingroom/internal/tools/samtemplate"
	"github.com/example/waitingroom/internal/webpush"
)

// pushSender is the template's push sender function.
const pushSender = "PushSenderFunction"

// TestPushSenderFunction runs the sender's bootstrap under the emulator
// against moto, as the schedule starts it: the first invocation makes the
// stack's VAPID key through KMS and stores it wrapped, runs until its
// deadline's reserve and claims the turn of a subscriber already admitted
// (its push service's name does not resolve here: dropped, as a 410 is); the
// second, finding nobody left subscribed, ends at once and makes no key.
func TestPushSenderFunction(t *testing.T) {
	rie := findRIE(t)
	ctx := t.Context()
	r := provide(t)
	store, kmsProxy := dynamostore.New(r.client, r.table), r.kmsProxy

	// A program admitting at 100/s and a subscriber whose turn has come.
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithPush(webpush.DefaultHosts))
	set := api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(100)), Paused: new(false)}
	if _, _, err := svc.PutProgram(history.WithActor(ctx, history.SystemActor), "gala", set); err != nil {
		t.Fatal(err)
	}
	sub := api.PushSubscription{Endpoint: "https://fcm.googleapis.com/fcm/send/emulator", Keys: api.PushKeys{
		P256DH: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", Auth: "BTBZMqHH6r4Tts7J_aSIgg"}}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{Push: &sub})
	if err != nil || !v.Push {
		t.Fatalf("enter: %+v, %v", v, err)
	}

	// A deployment with push; runs of 7 s rather than a minute (30 s less
	// the reserve and a lease).
	log := runScheduled(t, rie, r, pushSender, config.EnvPushSubject+"=mailto:ops@example.com", "AWS_LAMBDA_FUNCTION_TIMEOUT=30")
	if made, opened := kmsProxy.Calls("GenerateDataKeyPair"), kmsProxy.Calls("Decrypt"); made != 1 || opened != 0 {
		t.Errorf("KMS: %d GenerateDataKeyPair, %d Decrypt; want the key made once, by the cold start that kept it", made, opened)
	}
	key, err := store.VAPIDKey(ctx)
	if err != nil || len(key.Wrapped) == 0 {
		t.Fatalf("VAPID key: %+v, %v", key, err)
	}
	tok, err := store.GetToken(ctx, v.TokenID)
	if err != nil || tok.PushStage != queue.PushTurn {
		t.Errorf("the subscriber's token: stage %v, %v; want its turn claimed", tok.PushStage, err)
	}
	var runs int
	for line := range strings.Lines(log) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "push run" {
			runs++
			if c, _ := rec["counts"].(map[string]any); c["Retried"] == nil {
				t.Errorf("push run line %s lacks its counts", line)
			}
		}
	}
	if runs != 2 {
		t.Errorf("%d push run lines, want one an invocation", runs)
	}
}

// runScheduled builds function id's bootstrap, runs it under the emulator
// with the template's environment and extra, invokes it twice as its
// schedule would, and returns the emulator's and function's output once
// stopped (logged if t fails).
func runScheduled(t *testing.T, rie string, r resources, id string, extra ...string) string {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./"+samtemplate.MainPackage(id))
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env, err := lambdaemu.FunctionEnv(r.tpl, id, r.res)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	emu, err := lambdaemu.Start(rie, bootstrap, append(env, extra...), &log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("emulator and function output:\n%s", log.String())
		}
	})
	defer emu.Stop()
	for i := range 2 {
		ictx, cancel := context.WithTimeout(t.Context(), time.Minute)
		out, err := emu.Invoke(ictx, []byte(`{}`))
		cancel()
		if err != nil || string(out) != "null" {
			t.Fatalf("invocation %d: %s, %v", i+1, out, err)
		}
	}
	emu.Stop()
	return log.String()
}
