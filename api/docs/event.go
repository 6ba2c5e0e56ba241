package docs

import (
	"strings"

	"svc/schema"
)

// eventSchema is the schema of one event of POST /events, generated from
// schema.EventFields: each member's type, length bounds, format, pattern and
// description, nested in the objects that group members, and the required ones.
func eventSchema() Schema {
	objects := map[string]Schema{"": object("One server-side event.", nil, Schema{})}
	for _, f := range schema.EventFields {
		if f.JSON == "" {
			continue
		}
		parent, name := "", f.JSON
		if i := strings.LastIndexByte(f.JSON, '.'); i >= 0 {
			parent, name = f.JSON[:i], f.JSON[i+1:]
		}
		s := Schema{"type": f.Kind.String(), "description": f.Doc}
		if f.Kind == schema.Object {
			s = object(f.Doc, nil, Schema{})
			objects[f.JSON] = s
		}
		if f.MinLen > 0 {
			s["minLength"] = f.MinLen
		}
		if f.MaxLen > 0 {
			s["maxLength"] = f.MaxLen
		}
		if f.Format != "" {
			s["format"] = f.Format
		}
		if f.Pattern != "" {
			s["pattern"] = f.Pattern
		}
		in := objects[parent]
		in["properties"].(Schema)[name] = s
		if f.Required {
			req, _ := in["required"].([]string)
			in["required"] = append(req, name)
		}
	}
	return objects[""]
}
