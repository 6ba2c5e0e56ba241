package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"svc/schema/apitest"
	"svc/schema/workspace"
)

// `svc admin workspace set-alerts` changes the settings given and keeps the others,
// refuses values out of bounds, and --off turns everything off.
func TestAdminSetAlerts(t *testing.T) {
	rdb := apitest.Redis(t)
	ks := workspace.NewStore(rdb)
	ctx := context.Background()
	w, err := ks.CreateWorkspace(ctx, "alerts test", false)
	if err != nil {
		t.Fatal(err)
	}
	org := "org_" + w.ID.String()
	e := &Env{Keys: ks, Redis: rdb, Out: &bytes.Buffer{}}
	run := func(args ...string) (AlertsJSON, error) {
		out, err := Builtin["workspace set-alerts"].Run(ctx, e, append([]string{org}, args...))
		if err != nil {
			return AlertsJSON{}, err
		}
		return out.(AlertsJSON), nil
	}
	got, err := run("--rejections-threshold", "0.05", "--rejections-window", "10m")
	if err != nil || *got.RejectionsThreshold != 0.05 || got.RejectionsWindow != "10m0s" || got.RejectionsMinEvents != 100 || got.SilentAfter != nil {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err = run("--silent-after", "2h"); err != nil || *got.SilentAfter != "2h0m0s" || *got.RejectionsThreshold != 0.05 {
		t.Fatalf("the threshold was not kept: %+v %v", got, err)
	}
	a, _ := workspace.NewAlertSettings(rdb).Get(ctx, w.ID)
	if a != (workspace.Alerts{RejectionsThreshold: 0.05, RejectionsWindow: 10 * time.Minute, SilentAfter: 2 * time.Hour}) {
		t.Fatalf("stored %+v", a)
	}
	for _, bad := range [][]string{{"--rejections-threshold", "1.5"}, {"--rejections-window", "90s"}, {"--silent-after", "30s"},
		{"--silent-after", "200h"}, {"--off", "--silent-after", "1h"}, {}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("set-alerts %s accepted", strings.Join(bad, " "))
		}
	}
	if got, err = run("--off"); err != nil || got.RejectionsThreshold != nil || got.SilentAfter != nil {
		t.Fatalf("--off: %+v %v", got, err)
	}
	if a, _ := workspace.NewAlertSettings(rdb).Get(ctx, w.ID); !a.Off() {
		t.Fatalf("stored after --off: %+v", a)
	}
}
