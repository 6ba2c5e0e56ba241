package docs

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// Schema is a JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1) as a plain map,
// so the document, the MCP tools and the validator share one representation.
type Schema = map[string]any

// Validate checks v (a value decoded by encoding/json: map[string]any, []any, string,
// float64, bool, nil) against s, resolving "#/components/schemas/<name>" references in
// components. It implements the subset the document uses: type (one or a list), enum,
// const, properties, required, additionalProperties (false or a schema), items,
// minItems, maxItems, minLength, maxLength, pattern, minimum, maximum, oneOf, anyOf,
// allOf and $ref. Keywords it does not know (format, description, examples…) are
// annotations and never fail. It returns every violation, each with its JSON Pointer.
func Validate(s Schema, v any, components map[string]Schema) []string {
	var errs []string
	validate(s, v, "", components, &errs, 0)
	return errs
}

func validate(s Schema, v any, at string, comps map[string]Schema, errs *[]string, depth int) {
	if depth > 64 {
		*errs = append(*errs, at+": schema nesting too deep")
		return
	}
	fail := func(format string, args ...any) {
		p := at
		if p == "" {
			p = "/"
		}
		*errs = append(*errs, p+": "+fmt.Sprintf(format, args...))
	}
	if r, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(r, "#/components/schemas/")
		t, ok := comps[name]
		if !ok {
			fail("unresolved $ref %s", r)
			return
		}
		validate(t, v, at, comps, errs, depth+1)
	}
	if t, ok := s["type"]; ok && !typeMatches(t, v) {
		fail("type %s, want %v", typeOf(v), t)
		return
	}
	if e, ok := s["enum"].([]any); ok && !containsValue(e, v) {
		fail("%v is not one of %v", v, e)
	}
	if e, ok := s["enum"].([]string); ok {
		sv, _ := v.(string)
		found := false
		for _, x := range e {
			found = found || x == sv
		}
		if !found {
			fail("%v is not one of %v", v, e)
		}
	}
	if c, ok := s["const"]; ok && !equalValue(c, v) {
		fail("%v is not %v", v, c)
	}
	for _, sub := range schemaList(s["allOf"]) {
		validate(sub, v, at, comps, errs, depth+1)
	}
	if subs := schemaList(s["anyOf"]); len(subs) > 0 {
		ok := false
		for _, sub := range subs {
			ok = ok || len(Validate(sub, v, comps)) == 0
		}
		if !ok {
			fail("matches none of anyOf")
		}
	}
	if subs := schemaList(s["oneOf"]); len(subs) > 0 {
		n := 0
		for _, sub := range subs {
			if len(Validate(sub, v, comps)) == 0 {
				n++
			}
		}
		if n != 1 {
			fail("matches %d of oneOf, want exactly 1", n)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(Schema)
		for _, r := range stringList(s["required"]) {
			if _, ok := x[r]; !ok {
				fail("required property %q is missing", r)
			}
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if ps, ok := props[k].(Schema); ok {
				validate(ps, x[k], at+"/"+escapePointer(k), comps, errs, depth+1)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					fail("property %q is not allowed", k)
				}
			case Schema:
				validate(ap, x[k], at+"/"+escapePointer(k), comps, errs, depth+1)
			}
		}
	case []any:
		if n, ok := num(s["minItems"]); ok && float64(len(x)) < n {
			fail("%d items, want at least %v", len(x), n)
		}
		if n, ok := num(s["maxItems"]); ok && float64(len(x)) > n {
			fail("%d items, want at most %v", len(x), n)
		}
		if is, ok := s["items"].(Schema); ok {
			for i, e := range x {
				validate(is, e, fmt.Sprintf("%s/%d", at, i), comps, errs, depth+1)
			}
		}
	case string:
		if n, ok := num(s["minLength"]); ok && float64(len([]rune(x))) < n {
			fail("length %d, want at least %v", len([]rune(x)), n)
		}
		if n, ok := num(s["maxLength"]); ok && float64(len([]rune(x))) > n {
			fail("length %d, want at most %v", len([]rune(x)), n)
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := compile(p)
			if err != nil {
				fail("bad pattern %q: %v", p, err)
			} else if !re.MatchString(x) {
				fail("%q does not match %s", x, p)
			}
		}
	case float64:
		if n, ok := num(s["minimum"]); ok && x < n {
			fail("%v is below the minimum %v", x, n)
		}
		if n, ok := num(s["maximum"]); ok && x > n {
			fail("%v is above the maximum %v", x, n)
		}
	}
}

var patterns = map[string]*regexp.Regexp{}

func compile(p string) (*regexp.Regexp, error) {
	if re, ok := patterns[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err == nil {
		patterns[p] = re
	}
	return re, err
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func schemaList(v any) []Schema {
	switch x := v.(type) {
	case []Schema:
		return x
	case []any:
		var out []Schema
		for _, e := range x {
			if s, ok := e.(Schema); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func stringList(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(t any, v any) bool {
	got := typeOf(v)
	for _, w := range stringList(t) {
		if w == got || w == "number" && got == "integer" {
			return true
		}
	}
	if w, ok := t.(string); ok {
		return w == got || w == "number" && got == "integer"
	}
	return false
}

func containsValue(list []any, v any) bool {
	for _, e := range list {
		if equalValue(e, v) {
			return true
		}
	}
	return false
}

func equalValue(a, b any) bool {
	if fa, ok := num(a); ok {
		fb, ok := b.(float64)
		return ok && fa == fb
	}
	return fmt.Sprint(a) == fmt.Sprint(b) && typeOf(a) == typeOf(b)
}

// Components returns the document's named schemas (a fresh copy).
func Components() map[string]Schema { return components() }

// Inline returns s with every "#/components/schemas/<name>" reference replaced by the
// schema it names, recursively: a self-contained schema (MCP tool schemas need one).
func Inline(s Schema) Schema {
	return inline(s, components(), 0).(Schema)
}

func inline(v any, comps map[string]Schema, depth int) any {
	if depth > 32 {
		return Schema{}
	}
	switch x := v.(type) {
	case Schema:
		if r, ok := x["$ref"].(string); ok {
			if t, ok := comps[strings.TrimPrefix(r, "#/components/schemas/")]; ok {
				return inline(t, comps, depth+1)
			}
		}
		out := Schema{}
		for k, e := range x {
			out[k] = inline(e, comps, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inline(e, comps, depth+1)
		}
		return out
	case []Schema:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inline(e, comps, depth+1)
		}
		return out
	}
	return v
}
