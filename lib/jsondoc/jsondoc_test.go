package jsondoc

import "testing"

func TestDuplicate(t *testing.T) {
	for doc, want := range map[string]Path{
		`{"a":1,"b":2}`:                            {},
		`{"a":1,"a":2}`:                            {"/a", "a"},
		`{"identity":{"email":"x","email":"y"}}`:   {"/identity/email", "identity.email"},
		`{"identity":{"email":"x"},"identity":{}}`: {"/identity", "identity"},
		`{"rows":[{"d":1},{"d":1,"e":2,"d":3}]}`:   {"/rows/1/d", "rows[1].d"},
		`{"x":{"a":1},"y":{"a":1}}`:                {},
		`{"a/b":1,"a/b":2}`:                        {"/a~1b", "a/b"},
		`[{"k":1},{"k":1,"k":2}]`:                  {"/1/k", "[1].k"},
		`{"a":[1,{"b":[{"c":1,"c":1}]}]}`:          {"/a/1/b/0/c", "a[1].b[0].c"},
		`{"a":"{\"b\":1,\"b\":2}"}`:                {},
		`not json`:                                 {},
		`{"a":1,`:                                  {},
		`"s"`:                                      {},
		`{"e\u0061":1,"ea":2}`:                     {"/ea", "ea"},
		`{"a":{"a":{"a":1}},"b":[[],{},{"a":null,"b":true}]}`:      {},
		`{"events":[{"event_name":"x"},{"event_name":"x"}],"e":1}`: {},
	} {
		got, found := Duplicate([]byte(doc))
		if got != want || found != (want != Path{}) {
			t.Errorf("Duplicate(%s) = %+v, %v; want %+v", doc, got, found, want)
		}
	}
}

func TestCheck(t *testing.T) {
	if p := Check([]byte(`{"a":1}`)); p != nil {
		t.Fatalf("Check of a document without duplicates: %+v", p)
	}
	p := Check([]byte(`{"rows":[{"date":"x","date":"y"}]}`))
	if p == nil || p.Status != 422 || len(p.Errors) != 1 {
		t.Fatalf("Check: %+v", p)
	}
	if e := p.Errors[0]; e.Field != "rows[0].date" || e.Pointer != "/rows/0/date" || e.Rule != RuleDuplicate || e.Value != nil {
		t.Fatalf("Check's error %+v", e)
	}
}
