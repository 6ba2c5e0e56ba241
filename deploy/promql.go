package deploy

import (
	"regexp"
	"sort"
	"strings"
)

var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true,
		"without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true, "atan2": true, "start": true, "end": true,
	}
)

// SeriesNames returns the metric (series) names a PromQL expression selects, sorted and
// without repeats: every identifier that is not a function or aggregation (followed by
// "("), a keyword, a label name in a matcher or grouping, or inside a string or a range.
// Grafana variables ($__rate_interval, ${datasource}) are dropped. It is a scanner for
// lint checks, not a parser: promtool parses the rules for real.
func SeriesNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promGrouping.ReplaceAllString(s, " ")
	for prev := ""; prev != s; {
		prev = s
		s = promMatchers.ReplaceAllString(s, " ")
		s = promRanges.ReplaceAllString(s, " ")
	}
	seen := map[string]bool{}
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "$.0123456789") {
			continue // a variable, or part of a number such as 1e3
		}
		if promKeywords[name] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
