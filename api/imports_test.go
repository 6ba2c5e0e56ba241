package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/schema/apitest"
	"svc/schema/catalog"
)

// onePlan imports a plan with two lines into tn's workspace and returns the plan and
// line ids.
func onePlan(t *testing.T, e *env, tn tenant, name string) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	line := func(n string) catalog.LineDoc {
		return catalog.LineDoc{Name: n, Channel: "social", BuyType: "cpm", UnitCost: decimal.NewFromInt(5),
			StartDate: "2026-01-01", EndDate: "2026-12-31", Budget: decimal.NewFromInt(1000), Status: "live"}
	}
	b := e.importDoc(t, tn, catalog.Document{Plans: []catalog.PlanDoc{{Name: name, Objective: "awareness", Status: "live",
		StartDate: "2026-01-01", EndDate: "2026-12-31", Budget: decimal.NewFromInt(2000), Currency: "EUR",
		Lines: []catalog.LineDoc{line("a"), line("b")}}}})
	return b.Plans[0].ID, []uuid.UUID{b.Lines[0].ID, b.Lines[1].ID}
}

func row(plan, line uuid.UUID, date string, imp int, spend string) string {
	return fmt.Sprintf(`{"plan_id":"pln_%s","line_id":"lin_%s","date":%q,"impressions":%d,"clicks":3,"spend":%s,"currency":"EUR","conversions":1}`,
		plan, line, date, imp, spend)
}

func physicalRows(t *testing.T, e *env) uint64 {
	t.Helper()
	var n uint64
	if err := e.Conn.QueryRow(context.Background(), "SELECT count() FROM plan_actuals").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestImportRestatedThriceLastValueStands(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, lines := onePlan(t, e, tn, "restate")
	for i, spend := range []string{"10.5", `"20.25"`, "30.125"} {
		body := `{"rows":[` + row(plan, lines[0], "2026-02-01", 100*(i+1), spend) + `]}`
		r := e.Do(t, "POST", "/imports/actuals", tn.Secret, body)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"upserted":1`) {
			t.Fatalf("import %d: %d %s", i, r.Status, r.Body)
		}
	}
	got := e.walk(t, tn.Secret, "/plans/"+plan.String()+"/actuals", 10)
	if len(got) != 1 || got[0]["impressions"] != float64(300) || got[0]["spend"] != "30.1250" ||
		got[0]["line_id"] != "lin_"+lines[0].String() || got[0]["line_id_uuid"] != lines[0].String() ||
		got[0]["plan_id"] != "pln_"+plan.String() || got[0]["date"] != "2026-02-01" || got[0]["currency"] != "EUR" {
		t.Fatalf("after three statements: %v", got)
	}
}

func TestImportReplayedWithItsKeyCreatesNothing(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, lines := onePlan(t, e, tn, "replay")
	body := `{"rows":[` + row(plan, lines[0], "2026-02-01", 1, "1") + "," + row(plan, lines[1], "2026-02-01", 2, "2") + `]}`
	first := e.Do(t, "POST", "/v1/imports/actuals", tn.Secret, body, "Idempotency-Key", "imp-1")
	if first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	before := physicalRows(t, e)
	again := e.Do(t, "POST", "/v1/imports/actuals", tn.Secret, body, "Idempotency-Key", "imp-1")
	if again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("replay: %d %v %s", again.Status, again.Header, again.Body)
	}
	if after := physicalRows(t, e); after != before || before != 2 {
		t.Fatalf("rows stored: %d before the replay, %d after (want 2 and 2)", before, after)
	}
	other := strings.Replace(body, `"impressions":1,`, `"impressions":9,`, 1)
	apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, other, "Idempotency-Key", "imp-1"), 409, "idempotency_key_reuse")
}

func TestImportValidation(t *testing.T) {
	e := newEnv(t)
	tn, other := e.tenant(t, false), e.tenant(t, false)
	plan, lines := onePlan(t, e, tn, "mine")
	plan2, lines2 := onePlan(t, e, tn, "second")
	_, foreign := onePlan(t, e, other, "theirs")

	many := make([]string, 501)
	for i := range many {
		many[i] = row(plan, lines[0], fmt.Sprintf("2026-01-%02d", 1+i%28), 1, "1")
	}
	p := apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, `{"rows":[`+strings.Join(many, ",")+`]}`), 422, "invalid_request")
	if errs := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["rule"] != "max_items" || errs[0].(map[string]any)["value"] != float64(501) {
		t.Fatalf("501 rows: %v", p["errors"])
	}

	bad := `{"rows":[
		{"plan_id":"pln_nope","line_id":"lin_` + lines[0].String() + `","date":"2026-13-01","impressions":-1,"clicks":1.5,"spend":"1.00001","currency":"eur","extra":1},
		{"line_id":7,"date":"2026-01-01","spend":-2,"currency":"EUR"},
		` + row(plan, lines[0], "2026-01-05", 1, "1") + `,
		` + row(plan, lines[0], "2026-01-05", 2, "2") + `
	]}`
	p = apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, bad), 422, "invalid_request")
	want := map[string]string{"rows[0].plan_id": "id", "rows[0].date": "date", "rows[0].impressions": "non_negative_integer",
		"rows[0].clicks": "non_negative_integer", "rows[0].spend": "money", "rows[0].currency": "currency",
		"rows[0].extra": "unknown_field", "rows[1].plan_id": "required", "rows[1].line_id": "string", "rows[1].spend": "money",
		"rows[3].date": "unique_per_line_and_day"}
	got := map[string]string{}
	for _, x := range p["errors"].([]any) {
		m := x.(map[string]any)
		got[m["field"].(string)] = m["rule"].(string)
		if m["pointer"] != catalog.Pointer(m["field"].(string)) {
			t.Errorf("pointer %v for %v", m["pointer"], m["field"])
		}
	}
	for f, r := range want {
		if got[f] != r {
			t.Errorf("%s: rule %q, want %q (all %v)", f, got[f], r, got)
		}
	}

	// A member named twice: which copy counts, JSON does not say.
	twice := strings.Replace(row(plan, lines[0], "2026-01-01", 1, "1"), `"spend":`, `"spend":"9.00","spend":`, 1)
	p = apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, `{"rows":[`+twice+`]}`), 422, "invalid_request")
	if errs := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "rows[0].spend" ||
		errs[0].(map[string]any)["rule"] != "duplicate_member" || errs[0].(map[string]any)["pointer"] != "/rows/0/spend" {
		t.Fatalf("a member named twice: %v", p["errors"])
	}

	// A line of another plan, of another workspace, or unknown: the same answer.
	wrong := `{"rows":[` + row(plan, lines2[0], "2026-01-01", 1, "1") + "," + row(plan2, foreign[0], "2026-01-01", 1, "1") +
		"," + row(plan, uuid.New(), "2026-01-01", 1, "1") + `]}`
	p = apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, wrong), 422, "invalid_request")
	if errs := p["errors"].([]any); len(errs) != 3 || errs[1].(map[string]any)["rule"] != "line_of_plan" {
		t.Fatalf("foreign lines: %v", errs)
	}
	for _, body := range []string{"", "not json", "[]", `{"rows":{}}`, `{"rows":[]}`, `{"rows":[1]}`, `{"rows":null}`} {
		apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, body), 422, "invalid_request")
	}
	// A required member given as "" is missing: 422 on its field, never a 500.
	for field, body := range map[string]string{
		"rows[0].date":     `{"rows":[{"plan_id":"` + plan.String() + `","line_id":"` + lines[0].String() + `","date":"","currency":"EUR","spend":"1"}]}`,
		"rows[0].currency": `{"rows":[{"plan_id":"` + plan.String() + `","line_id":"` + lines[0].String() + `","date":"2026-01-02","currency":"","spend":"1"}]}`,
		"rows[0].plan_id":  `{"rows":[{"plan_id":"","line_id":"` + lines[0].String() + `","date":"2026-01-02","currency":"EUR"}]}`,
		"rows[0].line_id":  `{"rows":[{"plan_id":"` + plan.String() + `","line_id":"","date":"2026-01-02","currency":"EUR"}]}`,
	} {
		p := apitest.Problem(t, e.Do(t, "POST", "/imports/actuals", tn.Secret, body), 422, "invalid_request")
		if errs, _ := p["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != field || errs[0].(map[string]any)["rule"] != "required" {
			t.Errorf("%s empty: %v", field, p["errors"])
		}
	}
	if n := physicalRows(t, e); n != 0 {
		t.Fatalf("rejected imports wrote %d rows", n)
	}
}
