package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/api/docs"
	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/schema/erasure"
	"svc/schema/workspace"
)

// TestPostErasureRefusesBadBodies: every malformed request is 422 invalid_request
// naming the field and rule, and no answer echoes an address or a digest.
func TestPostErasureRefusesBadBodies(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	secret255 := "secret@" + strings.Repeat("d", 255-len("secret@")-len("example.com")) + "example.com"
	if len(secret255) != 255 {
		t.Fatalf("a %d-byte address", len(secret255))
	}
	cases := []struct{ body, field, rule string }{
		{`[]`, "body", "json_object"},
		{`{}`, "identity", "required"},
		{`{"identity": "secret@example.com"}`, "identity", "type_object"},
		{`{"identity": {}}`, "identity", "exactly_one_of_email_email_sha256"},
		{`{"identity": {"email": "secret@example.com", "email_sha256": "` + strings.Repeat("a", 64) + `"}}`, "identity", "exactly_one_of_email_email_sha256"},
		{`{"identity": {"email": "Secret@Example.com"}}`, "identity.email", "normalised"},
		{`{"identity": {"email": " secret@example.com"}}`, "identity.email", "normalised"},
		{`{"identity": {"email": "Sécret@example.com"}}`, "identity.email", "normalised"},
		{`{"identity": {"email": "secret@example.com\u00a0"}}`, "identity.email", "normalised"},
		{"{\"identity\": {\"email\": \"se\xffcret@example.com\"}}", "identity.email", "email"},
		{`{"identity": {"email": "a@example.com", "email": "b@example.com"}}`, "identity.email", "duplicate_member"},
		{`{"identity": {"email": "a@example.com"}, "identity": {"email": "b@example.com"}}`, "identity", "duplicate_member"},
		{`{"identity": {"email": "a@example.com"}, "suppress": null}`, "suppress", "type_boolean"},
		{`{"identity": {"email": "a@example.com"}, "secret@example.com": 1}`, "(withheld)", "unknown_field"},
		{`{"identity": {"email": "secret-at-example.com"}}`, "identity.email", "email"},
		{`{"identity": {"email": 42}}`, "identity.email", "type_string"},
		// "at most 254 bytes" (events.md), as POST /events requires (privacy.md): 255 are refused.
		{`{"identity": {"email": "` + secret255 + `"}}`, "identity.email", "email"},
		{`{"identity": {"email_sha256": "secret"}}`, "identity.email_sha256", "sha256_hex"},
		{`{"identity": {"email_sha256": "` + strings.Repeat("g", 64) + `"}}`, "identity.email_sha256", "sha256_hex"},
		{`{"identity": {"email": "secret@example.com", "phone": "1"}}`, "identity.phone", "unknown_field"},
		{`{"identity": {"email": "secret@example.com"}, "suppress": "yes"}`, "suppress", "type_boolean"},
		{`{"identity": {"email": "secret@example.com"}, "mode": "hard"}`, "mode", "unknown_field"},
	}
	for _, c := range cases {
		r := e.Do(t, "POST", "/erasures", tn.Secret, c.body)
		if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"`+c.field+`"`) || !strings.Contains(string(r.Body), `"rule":"`+c.rule+`"`) {
			t.Errorf("POST %s: %d %s, want 422 %s/%s", c.body, r.Status, r.Body, c.field, c.rule)
		}
		low := strings.ToLower(string(r.Body))
		if strings.Contains(low, "secret@") || strings.Contains(low, "secret-at") || strings.Contains(low, strings.Repeat("g", 64)) {
			t.Errorf("POST %s: the answer echoes the identity: %s", c.body, r.Body)
		}
	}
	if n := len(list(t, e, tn.Secret, "/erasures")); n != 0 {
		t.Fatalf("%d erasures recorded from refused requests", n)
	}
}

// TestErasureRecordsThroughTheAPI: a request is 202 with a pending era_ record holding
// only the digest; it is readable by id and in the list (newest first, cursor pages,
// status filter) for its workspace only; an Idempotency-Key retry answers the same
// record; the scope is required; a sandbox key records a sandbox erasure.
func TestErasureRecordsThroughTheAPI(t *testing.T) {
	e := newEnv(t)
	tn, other, show := e.tenant(t, false), e.tenant(t, false), e.tenant(t, true)
	r := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email": "ada@example.com"}, "suppress": true}`, "Idempotency-Key", "era-1")
	if r.Status != 202 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	rec := r.JSON(t)
	sum := sha256.Sum256([]byte("ada@example.com"))
	id, _ := rec["id"].(string)
	if !strings.HasPrefix(id, "era_") || rec["status"] != "pending" || rec["suppress"] != true || rec["environment"] != "live" ||
		rec["identity"].(map[string]any)["email_sha256"] != hex.EncodeToString(sum[:]) || rec["events_affected"] != nil ||
		strings.Contains(string(r.Body), "ada@") {
		t.Fatalf("record: %s", r.Body)
	}
	t.Cleanup(func() {
		_ = e.Redis.HDel(context.Background(), "svc:privacy:{ids}", tn.Workspace.ID.String()+":"+hex.EncodeToString(sum[:])).Err()
	})
	set, err := erasure.NewRegistry(e.Redis).Refresh(context.Background())
	if err != nil || !set.Suppressed(tn.Workspace.ID, sum) {
		t.Fatalf("the identity is not registered for suppression: %v", err)
	}
	if again := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email": "ada@example.com"}, "suppress": true}`, "Idempotency-Key", "era-1"); again.Status != 202 || again.JSON(t)["id"] != id {
		t.Fatalf("retry with the same Idempotency-Key: %d %s", again.Status, again.Body)
	}
	if g := e.Do(t, "GET", "/erasures/"+id, tn.Secret, ""); g.Status != 200 || g.JSON(t)["id"] != id {
		t.Fatalf("GET own erasure: %d %s", g.Status, g.Body)
	}
	for _, p := range []string{"/erasures/" + id, "/erasures/" + strings.TrimPrefix(id, "era_")} {
		if g := e.Do(t, "GET", p, other.Secret, ""); g.Status != 404 {
			t.Fatalf("GET %s with another workspace's key: %d", p, g.Status)
		}
	}
	for _, bad := range []string{"era_x", "pln_" + uuid.NewString(), "%27"} {
		if g := e.Do(t, "GET", "/erasures/"+bad, tn.Secret, ""); g.Status != 404 {
			t.Fatalf("GET /erasures/%s: %d", bad, g.Status)
		}
	}
	hashes := []string{}
	for i := 0; i < 4; i++ {
		h := sha256.Sum256([]byte(fmt.Sprintf("p%d@example.com", i)))
		hashes = append(hashes, strings.ToUpper(hex.EncodeToString(h[:])))
		if r := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email_sha256": "`+hashes[i]+`"}}`); r.Status != 202 ||
			r.JSON(t)["identity"].(map[string]any)["email_sha256"] != strings.ToLower(hashes[i]) {
			t.Fatalf("POST by digest: %d %s", r.Status, r.Body)
		}
	}
	all := e.walk(t, tn.Secret, "/erasures", 2)
	if len(all) != 5 {
		t.Fatalf("walked %d erasures, want 5", len(all))
	}
	seen := map[string]bool{}
	for i, x := range all {
		if seen[x["id"].(string)] {
			t.Fatalf("erasure %s listed twice", x["id"])
		}
		seen[x["id"].(string)] = true
		if i > 0 && x["requested_at"].(string) > all[i-1]["requested_at"].(string) {
			t.Fatalf("not newest first: %v after %v", x["requested_at"], all[i-1]["requested_at"])
		}
	}
	if n := len(list(t, e, tn.Secret, "/erasures?status=pending")); n != 5 {
		t.Fatalf("status=pending: %d", n)
	}
	if n := len(list(t, e, tn.Secret, "/erasures?status=completed")); n != 0 {
		t.Fatalf("status=completed: %d", n)
	}
	if n := len(list(t, e, other.Secret, "/erasures")); n != 0 {
		t.Fatalf("another workspace lists %d erasures", n)
	}
	if r := e.Do(t, "GET", "/erasures?status=done", tn.Secret, ""); r.Status != 422 {
		t.Fatalf("status=done: %d", r.Status)
	}
	_, narrow := e.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"pixels:read"}})
	for _, m := range []string{"GET", "POST"} {
		if r := e.Do(t, m, "/erasures", narrow, `{"identity": {"email": "ada@example.com"}}`); r.Status != 403 || !strings.Contains(string(r.Body), "insufficient_scope") {
			t.Fatalf("%s /erasures without identities:erase: %d %s", m, r.Status, r.Body)
		}
	}
	sb := e.Do(t, "POST", "/erasures", show.Secret, `{"identity": {"email": "demo@example.com"}}`)
	if sb.Status != 202 || sb.JSON(t)["environment"] != "sandbox" || sb.JSON(t)["workspace_id_uuid"] != show.Workspace.ID.String() {
		t.Fatalf("sandbox erasure: %d %s", sb.Status, sb.Body)
	}
	t.Cleanup(func() {
		d := sha256.Sum256([]byte("demo@example.com"))
		_ = e.Redis.HDel(context.Background(), "svc:privacy:{ids}", show.Workspace.ID.String()+":"+hex.EncodeToString(d[:])).Err()
		for _, h := range hashes {
			_ = e.Redis.HDel(context.Background(), "svc:privacy:{ids}", tn.Workspace.ID.String()+":"+strings.ToLower(h)).Err()
		}
	})
}

// TestErasureListsNeverFailOnBadInput: hostile query values and ids are 4xx, never 5xx.
func TestErasureListsNeverFailOnBadInput(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	values := []string{"", "'", `\`, "\x00", "' OR 1=1 --", strings.Repeat("x", 1500), "-1", "99999999999999999999",
		uuid.NewString(), "era_" + uuid.NewString(), "eyJsIjoiZXJhc3VyZXMiLCJ0IjotNX0", "eyJsIjoiZXJhc3VyZXMiLCJ0Ijo5OTk5OTk5OTk5OTl9"}
	for _, v := range values {
		for _, name := range []string{"status", "cursor", "limit", "offset"} {
			if r := e.Do(t, "GET", "/erasures?"+name+"="+url.QueryEscape(v), tn.Secret, ""); r.Status >= 500 {
				t.Fatalf("GET /erasures?%s=%q: %d %s", name, v, r.Status, r.Body)
			}
		}
		if r := e.Do(t, "GET", "/erasures/"+url.PathEscape(v), tn.Secret, ""); r.Status >= 500 {
			t.Fatalf("GET /erasures/%q: %d %s", v, r.Status, r.Body)
		}
		if r := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email_sha256": `+jsonString(v)+`}}`); r.Status >= 500 {
			t.Fatalf("POST digest %q: %d %s", v, r.Status, r.Body)
		}
	}
}

// TestAccountShowsRetention: GET /account carries raw_event_retention_days, null until
// set.
func TestAccountShowsRetention(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	a := e.Do(t, "GET", "/account", tn.Secret, "").JSON(t)
	if a["raw_event_retention_days"] != nil {
		t.Fatalf("a new workspace has a retention: %v", a)
	}
	// The answer of a workspace without catalog data ("" fields) is what the OpenAPI
	// document declares, every member of it declared.
	comps := docs.Components()
	if errs := docs.Validate(docs.Schema{"$ref": "#/components/schemas/Account"}, a, comps); len(errs) > 0 {
		t.Fatalf("GET /account %v against its schema: %v", a, errs)
	}
	props, _ := comps["Account"]["properties"].(docs.Schema)
	for k := range a {
		if _, ok := props[k]; !ok {
			t.Errorf("GET /account's member %q is not in the OpenAPI schema", k)
		}
	}
	rt := workspace.NewRetention(e.Redis)
	if err := rt.Set(context.Background(), tn.Workspace.ID, 30); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Set(context.Background(), tn.Workspace.ID, 0) })
	if a := e.Do(t, "GET", "/account", tn.Secret, "").JSON(t); a["raw_event_retention_days"] != float64(30) {
		t.Fatalf("account: %v", a)
	}
}

func list(t *testing.T, e *env, secret, path string) []map[string]any {
	t.Helper()
	var p listPage
	if r := e.get(t, secret, path, &p); r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	return p.Data
}

// An Idempotency-Key used again after its record expired (24 h) makes a new erasure: a
// request for another person, or for the same person a day later, runs; only a retry of
// the same request within the window is the same erasure.
func TestErasureIdempotencyKeyReusedLater(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	ctx := context.Background()
	sumOf := func(email string) [32]byte { return sha256.Sum256([]byte(email)) }
	for _, email := range []string{"ada@example.com", "bob@example.com"} {
		sum := sumOf(email)
		t.Cleanup(func() {
			_ = e.Redis.HDel(context.Background(), "svc:privacy:{ids}", tn.Workspace.ID.String()+":"+hex.EncodeToString(sum[:])).Err()
		})
	}
	// Each key was used 31 hours ago for Ada's erasure, done since; now again, for Ada and
	// for Bob.
	past := time.Now().UTC().Add(-31 * time.Hour).Truncate(time.Second)
	for key, email := range map[string]string{"ticket-7": "ada@example.com", "ticket-8": "bob@example.com"} {
		derived := erasure.NewID(tn.Key.ID, []byte(key))
		done := &erasure.Erasure{ID: derived, Workspace: tn.Workspace.ID, Email: sumOf("ada@example.com"), Stage: erasure.StageCompleted,
			RequestedAt: past, StartedAt: past, CompletedAt: past, KeyID: tn.Key.ID, RequestID: "req_0123456789abcdef01234567"}
		if err := erasure.Write(ctx, e.Conn, past, done); err != nil {
			t.Fatal(err)
		}
		r := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email": "`+email+`"}}`, "Idempotency-Key", key)
		if r.Status != 202 {
			t.Fatalf("POST /erasures for %s: %d %s", email, r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		if id == ids.Format(ids.Erasure, derived) {
			t.Fatalf("%s: the new request got the earlier erasure's id %s", email, id)
		}
		var got map[string]any
		if g := e.get(t, tn.Secret, "/erasures/"+id, &got); g.Status != 200 || got["status"] != "pending" {
			t.Fatalf("%s: GET /erasures/%s: %d %v, want the new request pending", email, id, g.Status, got)
		}
		sum := sumOf(email)
		if got["identity"].(map[string]any)["email_sha256"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: the record is of another identity: %v", email, got)
		}
	}
}

// A retry that reaches the handler (its Idempotency-Key's stored answer lost: a crash
// before it was stored) is the same erasure at the first request's time: the pipeline
// registers the identity as requested then, so a retry never widens which events in
// flight lose it.
func TestErasureRetryKeepsTheFirstRequestTime(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	ctx := context.Background()
	sum := sha256.Sum256([]byte("ada@example.com"))
	field := tn.Workspace.ID.String() + ":" + hex.EncodeToString(sum[:])
	t.Cleanup(func() { _ = e.Redis.HDel(context.Background(), "svc:privacy:{ids}", field).Err() })
	first := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	derived := erasure.NewID(tn.Key.ID, []byte("ticket-9"))
	done := &erasure.Erasure{ID: derived, Workspace: tn.Workspace.ID, Email: sum, Stage: erasure.StageCompleted,
		RequestedAt: first, StartedAt: first, CompletedAt: first, KeyID: tn.Key.ID, RequestID: "req_0123456789abcdef01234567"}
	if err := erasure.Write(ctx, e.Conn, first, done); err != nil {
		t.Fatal(err)
	}
	r := e.Do(t, "POST", "/erasures", tn.Secret, `{"identity": {"email": "ada@example.com"}}`, "Idempotency-Key", "ticket-9")
	if r.Status != 202 || r.JSON(t)["id"] != ids.Format(ids.Erasure, derived) {
		t.Fatalf("the retry: %d %s, want 202 for %s", r.Status, r.Body, ids.Format(ids.Erasure, derived))
	}
	got, err := e.Redis.HGet(ctx, "svc:privacy:{ids}", field).Result()
	if want := strconv.FormatInt(first.Unix(), 10) + ":0"; err != nil || got != want {
		t.Fatalf("the pipeline's entry %q (%v), want %q: registered at the first request's time", got, err, want)
	}
}
