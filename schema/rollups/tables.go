package rollups

import "strings"

// RollupTable describes a table that a materialized view fills from events, in terms
// that let a job rebuild chosen (workspace, environment, pixel, UTC day) slices of it
// from the raw events (privacy: after an erasure removed identities from events, the
// affected days are rebuilt so that unique people no longer count the person).
//
// Select and GroupBy must be the view's own (TestRollupTablesMatchTheirViews checks
// that rebuilding every row gives exactly what the view wrote). Every rollup table keys
// rows by workspace_id, sandbox and pixel_id, and each row belongs to one UTC day of
// events (Day): an hourly or 15-minute table whose buckets are UTC-aligned qualifies.
type RollupTable struct {
	// Name is the table the view writes to.
	Name string
	// View is the materialized view that fills it from events.
	View string
	// Columns are the table's columns in the order of Select.
	Columns []string
	// Select is the view's SELECT list over events (aliases as in the view).
	Select string
	// GroupBy is the view's GROUP BY list.
	GroupBy string
	// Day is an expression over the table's columns giving the UTC day whose events a
	// row aggregates (event_date for daily rows; toDate(bucket) for UTC buckets).
	Day string
}

// RollupTables lists every table a materialized view fills from events. A migration
// that adds such a view adds its table here (TestEveryEventsViewIsARollupTable fails
// until it does).
var RollupTables = []RollupTable{
	{
		Name: "pixel_rollups_daily",
		View: "pixel_rollups_daily_mv",
		Columns: []string{"workspace_id", "sandbox", "pixel_id", "event_date", "event_name", "currency",
			"events_state", "consented_state", "value_state", "people_state"},
		Select: `workspace_id, sandbox, pixel_id, event_date, event_name, currency,
    countState() AS events_state,
    sumState(toUInt64(consent)) AS consented_state,
    sumState(value) AS value_state,
    uniqIfState(email_sha256, consent = 1 AND has_email = 1) AS people_state`,
		GroupBy: "workspace_id, sandbox, pixel_id, event_date, event_name, currency",
		Day:     "event_date",
	},
	{
		Name: "pixel_rollups_15m",
		View: "pixel_rollups_15m_mv",
		Columns: []string{"workspace_id", "sandbox", "pixel_id", "bucket", "event_name", "currency",
			"events_state", "consented_state", "value_state", "people_state"},
		Select: `workspace_id, sandbox, pixel_id, toStartOfFifteenMinutes(occurred_at) AS bucket, event_name, currency,
    countState() AS events_state,
    sumState(toUInt64(consent)) AS consented_state,
    sumState(value) AS value_state,
    uniqIfState(email_sha256, consent = 1 AND has_email = 1) AS people_state`,
		GroupBy: "workspace_id, sandbox, pixel_id, bucket, event_name, currency",
		Day:     "toDate(bucket)",
	},
	{
		Name:    "pixel_accepted_minutes",
		View:    "pixel_accepted_minutes_mv",
		Columns: []string{"workspace_id", "sandbox", "pixel_id", "minute", "event_date", "events_state", "last_state"},
		Select: `workspace_id, sandbox, pixel_id, toStartOfMinute(received_at) AS minute, event_date,
    countState() AS events_state,
    maxState(received_at) AS last_state`,
		GroupBy: "workspace_id, sandbox, pixel_id, minute, event_date",
		Day:     "event_date",
	},
}

// RebuildSQL returns the INSERT … SELECT that rebuilds t's rows from the events that
// match where (a condition over events columns; the caller renders it from typed
// values). The rows it replaces must have been deleted first.
func (t RollupTable) RebuildSQL(db, where string) string {
	return "INSERT INTO " + db + "." + t.Name + " (" + strings.Join(t.Columns, ", ") + ")\nSELECT " + t.Select +
		"\nFROM " + db + ".events\nWHERE " + where + "\nGROUP BY " + t.GroupBy
}
