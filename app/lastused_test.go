package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/lib/limits"
	"svc/schema/workspace"
)

// A key's "last used" comes from its rate limiter's daily state: unknown before any
// request, the minute of the last one after.
func TestKeyLastUsed(t *testing.T) {
	rg := newRig(t, false)
	ws := rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	k, _ := rg.Key(t, workspace.KeySpec{WorkspaceID: ws.ID, Env: apikey.Live, Scopes: []string{"events:write"}, Burst: 10, Daily: 100})
	page := "/app/api-keys/" + ids.Format(ids.Key, k.ID)
	if p := adm.get(page); !strings.Contains(p.Body, `id="key-last-used">not in the last 24 h<`) {
		t.Fatalf("before any request:\n%s", p.Body)
	}
	before := when(time.Now()) // the minute may turn during the take
	b, d := limits.Windows(k.Burst, k.Daily)
	if _, err := limits.New(rg.Redis).Take(context.Background(), k.ID.String(), b, d); err != nil {
		t.Fatal(err)
	}
	want := when(time.Now())
	if p := adm.get(page); !strings.Contains(p.Body, `id="key-last-used">`+want+`<`) && !strings.Contains(p.Body, `id="key-last-used">`+before+`<`) {
		t.Fatalf("after a request (want %s):\n%s", want, p.Body)
	}
	if p := adm.get("/app/api-keys"); !strings.Contains(p.Body, `<td class="last-used">`+want+`</td>`) && !strings.Contains(p.Body, `<td class="last-used">`+before+`</td>`) {
		t.Fatalf("the keys screen (want %s):\n%s", want, p.Body)
	}
}
