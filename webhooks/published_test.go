package webhooks

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/api/docs"
)

// TestPublishedInboundExamplesAreProcessed posts every inbound message the service
// publishes (the OpenAPI request examples, the JSON and the shell examples of the
// webhooks page, in HTML and in its Markdown mirror), correctly signed, and expects each
// to be processed: what the documents show is what the receiver accepts.
func TestPublishedInboundExamplesAreProcessed(t *testing.T) {
	ie := newInbound(t, docs.Routes()...)
	sec := ie.secret(t)
	var examples []string
	var oa map[string]any
	if err := json.Unmarshal(ie.srv.Do(t, "GET", "/openapi.json", "", "").Body, &oa); err != nil {
		t.Fatal(err)
	}
	op := oa["paths"].(map[string]any)["/webhooks/inbound/{workspace}"].(map[string]any)["post"].(map[string]any)
	content := op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)
	var found []any
	if ex, ok := content["example"]; ok {
		found = append(found, ex)
	}
	exs, _ := content["examples"].(map[string]any)
	for _, e := range exs {
		found = append(found, e.(map[string]any)["value"])
	}
	for _, ex := range found {
		b, _ := json.Marshal(ex)
		examples = append(examples, string(b))
	}
	if n := len(examples); n < 2 {
		t.Errorf("OpenAPI publishes %d inbound examples, want one per type", n)
	}
	md := string(ie.srv.Do(t, "GET", "/developers/md/webhooks.md", "", "").Body)
	page := html.UnescapeString(string(ie.srv.Do(t, "GET", "/developers/webhooks", "", "").Body))
	for name, src := range map[string]string{"markdown": md, "html": page} {
		got := inboundMessages(src)
		if len(got) < 3 {
			t.Errorf("the %s webhooks page publishes %d inbound messages, want both types and the signing example", name, len(got))
		}
		examples = append(examples, got...)
	}
	for _, m := range regexp.MustCompile(`cmp_([0-9a-f-]{36})`).FindAllStringSubmatch(strings.Join(examples, "\n"), -1) {
		putCampaigns(t, ie.conn, ie.ws, uuid.MustParse(m[1]))
	}
	now := ie.clock.Now()
	for i, body := range examples {
		// Each signed at its own second: the same body signed at the same t is the same
		// signed content, which the receiver takes for a replay.
		r := ie.send(t, body, "published-"+strconv.Itoa(i), now.Add(-time.Duration(i)*time.Second), sec)
		if r.Status != 200 || r.JSON(t)["outcome"] != Processed {
			t.Errorf("published example %s: %d %s", body, r.Status, r.Body)
		}
	}
}

var (
	jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```|<code class=\"language-json\">(.*?)</code>")
	shellBody = regexp.MustCompile(`body='(\{[^']*\})'`)
)

// inboundMessages returns the JSON examples in a page (Markdown or HTML) whose type is
// one that writes actuals, and the bodies of its shell examples.
func inboundMessages(page string) []string {
	var out []string
	add := func(s string) {
		var m struct{ Type string }
		if json.Unmarshal([]byte(s), &m) == nil && (m.Type == "actuals.reported" || m.Type == "campaign.actuals") {
			out = append(out, s)
		}
	}
	for _, m := range jsonBlock.FindAllStringSubmatch(page, -1) {
		add(m[1] + m[2])
	}
	for _, m := range shellBody.FindAllStringSubmatch(page, -1) {
		add(m[1])
	}
	return out
}
