package client_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"svc/api/client"
	"svc/schema"
)

// jsonKinds is the declared kind each Go kind of the wire type sends.
var jsonKinds = map[reflect.Kind]schema.Kind{reflect.String: schema.String, reflect.Float64: schema.Number,
	reflect.Bool: schema.Bool, reflect.Struct: schema.Object}

// wireMembers lists the JSON paths of t's json tags (nested structs as objects) with the
// kind each sends.
func wireMembers(t reflect.Type, prefix string, out map[string]schema.Kind) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out[prefix+name] = jsonKinds[ft.Kind()]
		if ft.Kind() == reflect.Struct {
			wireMembers(ft, prefix+name+".", out)
		}
	}
}

// sentMembers lists the JSON paths of a marshalled event.
func sentMembers(v map[string]any, prefix string, out map[string]bool) {
	for k, x := range v {
		out[prefix+k] = true
		if m, ok := x.(map[string]any); ok {
			sentMembers(m, prefix+k+".", out)
		}
	}
}

// fill sets every field of the struct v, nested ones included, to a value that is not
// zero.
func fill(v reflect.Value) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// TestClientEventIsTheDeclaration: the client's wire type has a json tag for each member
// schema.EventFields declares, and no other, each of the declared kind; and an Event
// with every field set sends exactly those members.
func TestClientEventIsTheDeclaration(t *testing.T) {
	wire := map[string]schema.Kind{}
	wireMembers(reflect.TypeFor[client.WireEvent](), "", wire)
	declared := map[string]schema.Kind{}
	for _, f := range schema.EventFields {
		if f.JSON != "" {
			declared[f.JSON] = f.Kind
		}
	}
	for path, k := range declared {
		got, ok := wire[path]
		switch {
		case !ok:
			t.Errorf("declared member %s: the client's wire type has no json tag for it", path)
		case got != k:
			t.Errorf("member %s: the client sends a JSON %s, declared %s", path, got, k)
		}
	}
	for path := range wire {
		if _, ok := declared[path]; !ok {
			t.Errorf("the client's wire type sends %s, which schema.EventFields does not declare", path)
		}
	}

	var full client.Event
	fill(reflect.ValueOf(&full).Elem())
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	sentMembers(m, "", sent)
	var missing []string
	for path := range declared {
		if !sent[path] {
			missing = append(missing, path)
		}
		delete(sent, path)
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(sent) > 0 {
		t.Errorf("an Event with every field set sends %s: missing %v, undeclared %v", b, missing, sent)
	}
}
