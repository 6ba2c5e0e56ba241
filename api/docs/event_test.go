package docs_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"svc/api/docs"
	"svc/schema"
)

// TestOpenAPIEventIsTheDeclaration: the Event schema of the served document describes
// exactly the members of schema.EventFields, each with its type, length bounds, format,
// pattern, requiredness and description, nested in its objects.
func TestOpenAPIEventIsTheDeclaration(t *testing.T) {
	raw, err := json.Marshal(docs.OpenAPI(devRoutes(), "https://api.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ev, ok := doc.Components.Schemas["Event"]
	if !ok {
		t.Fatal("the document has no Event schema")
	}
	documented := map[string]string{}
	var walk func(prefix string, s map[string]any)
	walk = func(prefix string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for name, p := range props {
			ps := p.(map[string]any)
			documented[prefix+name] = describe(ps["type"], ps["minLength"], ps["maxLength"], ps["format"], ps["pattern"],
				slices.Contains(req, any(name)), ps["description"])
			if ps["type"] == "object" {
				walk(prefix+name+".", ps)
			}
		}
	}
	walk("", ev)
	for _, f := range schema.EventFields {
		if f.JSON == "" {
			continue
		}
		var minLen, maxLen, format, pattern any
		if f.MinLen > 0 {
			minLen = float64(f.MinLen)
		}
		if f.MaxLen > 0 {
			maxLen = float64(f.MaxLen)
		}
		if f.Format != "" {
			format = f.Format
		}
		if f.Pattern != "" {
			pattern = f.Pattern
		}
		want := describe(f.Kind.String(), minLen, maxLen, format, pattern, f.Required, f.Doc)
		got, ok := documented[f.JSON]
		switch {
		case !ok:
			t.Errorf("declared member %s is not in the OpenAPI Event schema", f.JSON)
		case got != want:
			t.Errorf("member %s:\n documented %s\n declared   %s", f.JSON, got, want)
		}
		delete(documented, f.JSON)
	}
	for path, d := range documented {
		t.Errorf("the OpenAPI Event schema documents %s (%s), which schema.EventFields does not declare", path, d)
	}
}

// describe prints one member's schema for comparison.
func describe(typ, minLen, maxLen, format, pattern any, required bool, desc any) string {
	parts := []string{fmt.Sprint("type=", typ)}
	for _, kv := range []struct {
		k string
		v any
	}{{"minLength", minLen}, {"maxLength", maxLen}, {"format", format}, {"pattern", pattern}} {
		if kv.v != nil {
			parts = append(parts, fmt.Sprintf("%s=%v", kv.k, kv.v))
		}
	}
	if required {
		parts = append(parts, "required")
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" description=%q", desc)
}

// TestEventsPageListsTheDeclaredMembers: the developer page's table of an event
// (pages/events.md, "An event") has one row per top-level member of schema.EventFields,
// with its type and whether it is required, and no other row.
func TestEventsPageListsTheDeclaredMembers(t *testing.T) {
	md, err := os.ReadFile("pages/events.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)## An event\n\n(\\|.*?)\n\n").FindSubmatch(md)
	if sec == nil {
		t.Fatal("pages/events.md has no table under ## An event")
	}
	rows := map[string]string{}
	for _, row := range strings.Split(string(sec[1]), "\n")[2:] {
		cells := strings.Split(row, "|")
		if len(cells) < 5 {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2]) + " " + strings.TrimSpace(cells[3])
	}
	for _, f := range schema.EventFields {
		if f.JSON == "" || strings.Contains(f.JSON, ".") {
			continue
		}
		required := "no"
		switch {
		case f.Required:
			required = "yes"
		case f.RequiredWith != "":
			required = "with `" + f.RequiredWith + "`"
		}
		want := f.Kind.String() + " " + required
		if got, ok := rows[f.JSON]; !ok {
			t.Errorf("pages/events.md does not list the member %s (%s)", f.JSON, want)
		} else if got != want {
			t.Errorf("pages/events.md lists %s as %q, declared %q", f.JSON, got, want)
		}
		delete(rows, f.JSON)
	}
	for name := range rows {
		t.Errorf("pages/events.md lists %s, which schema.EventFields does not declare", name)
	}
}
