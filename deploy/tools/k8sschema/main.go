// Command k8sschema writes the per-kind JSON schemas kubeconform validates against, from
// the Kubernetes OpenAPI v2 document (api/openapi-spec/swagger.json in the
// k8s.io/kubernetes module). It does here what openapi2jsonschema --kubernetes
// --stand-alone --strict does for the public kubernetes-json-schema registry, which this
// machine cannot reach:
//
//   - one file per kind and version, named {kind}{-group}-{version}.json in lower case,
//     the name kubeconform's "{{ .ResourceKind }}{{ .KindSuffix }}.json" template gives;
//   - standalone: every definition a kind references is carried in the file under
//     "definitions" (the $refs keep pointing at #/definitions/...);
//   - strict: every object schema that lists properties gets additionalProperties:
//     false, so a misspelt or misplaced field fails;
//   - int-or-string values and resource quantities accept a string or a number, as the
//     API server does.
//
// Usage: k8sschema -in swagger.json -out DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const refPrefix = "#/definitions/"

func main() {
	in := flag.String("in", "", "Kubernetes OpenAPI v2 document (swagger.json)")
	out := flag.String("out", "", "directory to write the schemas into")
	flag.Parse()
	if *in == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	n, err := run(*in, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: %d schemas written to %s\n", n, *out)
}

func run(in, out string) (int, error) {
	data, err := os.ReadFile(in)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", in, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions", in)
	}
	defs := map[string]any{}
	for name, d := range doc.Definitions {
		defs[name] = transform(name, d)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, err
	}
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	written := 0
	seen := map[string]string{}
	for _, name := range names {
		d := defs[name].(map[string]any)
		gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			if kind == "" || version == "" {
				continue
			}
			file := fileName(group, version, kind)
			if prev, ok := seen[file]; ok && prev != name {
				continue // the same kind under another definition name (a deprecated alias)
			}
			seen[file] = name
			schema := map[string]any{}
			for k, v := range d {
				schema[k] = v
			}
			// kind and apiVersion must name this kind exactly.
			if props, ok := schema["properties"].(map[string]any); ok {
				props = copyMap(props)
				apiVersion := version
				if group != "" {
					apiVersion = group + "/" + version
				}
				props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
				props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
				schema["properties"] = props
			}
			closure := map[string]any{}
			collect(d, defs, closure)
			if len(closure) > 0 {
				schema["definitions"] = closure
			}
			b, err := json.MarshalIndent(schema, "", "  ")
			if err != nil {
				return written, err
			}
			if err := os.WriteFile(filepath.Join(out, file), append(b, '\n'), 0o644); err != nil {
				return written, err
			}
			written++
		}
	}
	return written, nil
}

// fileName is kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json: the kind, the first
// label of the group (none for the core group) and the version, in lower case.
func fileName(group, version, kind string) string {
	suffix := ""
	if group != "" {
		suffix = "-" + strings.ToLower(strings.Split(group, ".")[0])
	}
	return strings.ToLower(kind) + suffix + "-" + strings.ToLower(version) + ".json"
}

func copyMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

var stringOrNumber = []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}

// transform rewrites one schema node (recursively) for kubeconform.
func transform(name string, node any) any {
	switch v := node.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = transform("", x)
		}
		if name == "io.k8s.apimachinery.pkg.api.resource.Quantity" {
			delete(m, "type")
			delete(m, "format")
			m["oneOf"] = stringOrNumber
		}
		if f, _ := m["format"].(string); f == "int-or-string" {
			delete(m, "type")
			delete(m, "format")
			m["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		}
		if _, ok := m["properties"]; ok {
			if _, set := m["additionalProperties"]; !set {
				m["additionalProperties"] = false
			}
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = transform("", x)
		}
		return out
	default:
		return v
	}
}

// collect adds to closure every definition node references, directly or not.
func collect(node any, defs map[string]any, closure map[string]any) {
	switch v := node.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, refPrefix) {
			name := strings.TrimPrefix(ref, refPrefix)
			if _, done := closure[name]; !done {
				if d, ok := defs[name]; ok {
					closure[name] = d
					collect(d, defs, closure)
				}
			}
		}
		for _, x := range v {
			collect(x, defs, closure)
		}
	case []any:
		for _, x := range v {
			collect(x, defs, closure)
		}
	}
}
