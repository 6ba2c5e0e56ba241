package schema_test

import (
	"context"
	"testing"

	"svc/schema"
	"svc/schema/chtest"
)

// TestMigratedEventsTableIsTheDeclaration: on the real server, the events table that the
// migrations build has exactly the columns schema.EventFields declares, with their types.
// A column a migration adds without its declaration fails, and so does a declared column
// no migration adds.
func TestMigratedEventsTableIsTheDeclaration(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	rows, err := conn.Query(context.Background(),
		"SELECT name, type FROM system.columns WHERE database = ? AND table = 'events'", cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	migrated := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		migrated[name] = typ
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(migrated) == 0 {
		t.Fatal("the migrated database has no events table")
	}
	for _, f := range schema.EventFields {
		if f.Column == "" {
			continue
		}
		typ, ok := migrated[f.Column]
		switch {
		case !ok:
			t.Errorf("declared column %s %s: no migration adds it to events", f.Column, f.CHType)
		case typ != f.CHType:
			t.Errorf("column %s: migrated as %s, declared %s", f.Column, typ, f.CHType)
		}
		delete(migrated, f.Column)
	}
	for name, typ := range migrated {
		t.Errorf("column %s %s of the migrated events table is not in schema.EventFields", name, typ)
	}
}
