package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/lib/svctest"
	"svc/schema/workspace"
)

// TestEndpointCreateRefusesInternal: `svc admin webhook endpoint create` refuses a URL
// whose host is an internal address, or localhost, unless the setting allows it.
func TestEndpointCreateRefusesInternal(t *testing.T) {
	rdb := svctest.Redis(t)
	ctx := context.Background()
	t.Setenv("SVC_WEBHOOKS_REDIS_PREFIX", "svc:test:"+uuid.NewString()[:8]+":wh:")
	ks := workspace.NewStore(rdb)
	w, err := ks.CreateWorkspace(ctx, "egress", false)
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Keys: ks, Redis: rdb}
	create := func(u string) error {
		_, err := cmdEndpointCreate(ctx, env, []string{"--workspace", w.ID.String(), "--url", u})
		return err
	}
	for u, why := range map[string]string{
		"http://127.0.0.1:8080/hook":                "127.0.0.1 is loopback",
		"http://localhost:8080/":                    "127.0.0.1 is loopback",
		"https://169.254.169.254/latest/meta-data/": "169.254.169.254 is cloud metadata",
		"http://[::ffff:10.0.0.1]/":                 "10.0.0.1 is private",
		"http://[fd00:ec2::254]/":                   "fd00:ec2::254 is cloud metadata",
		"http://2130706433/":                        "127.0.0.1 is loopback",
		"http://0x7f.1/":                            "127.0.0.1 is loopback",
		"http://[fe80::1%25eth0]:9/":                "fe80::1 is link-local",
		"http://100.64.1.1/":                        "100.64.1.1 is shared address space (CGNAT)",
		"http://0.0.0.0:8080/":                      "0.0.0.0 is unspecified",
		"http://[::1]/":                             "::1 is loopback",
		"https://192.168.1.10/x?token=do-not-print": "192.168.1.10 is private",
	} {
		err := create(u)
		if err == nil || !strings.HasPrefix(err.Error(), "--url: address_not_allowed: "+why+" (") {
			t.Errorf("endpoint create --url %s: %v, want --url: address_not_allowed: %s", u, err, why)
		}
	}
	if err := create("https://hooks.example.com/svc"); err != nil {
		t.Fatalf("a public name refused: %v", err)
	}
	t.Setenv("SVC_WEBHOOKS_ALLOW_NETS", "127.0.0.0/8, 10.1.0.0/16")
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/", "http://10.1.2.3/"} {
		if err := create(u); err != nil {
			t.Errorf("endpoint create --url %s with the setting allowing it: %v", u, err)
		}
	}
	if err := create("http://10.2.0.1/"); err == nil {
		t.Error("10.2.0.1 is outside the allowed ranges and was accepted")
	}
}
