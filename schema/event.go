package schema

// The event, declared once. EventFields is the one description of an event that every
// copy of its shape follows:
//
//   - the edge's parser (ingest): its member dispatch and presence rules are generated
//     from the table (ingest/members_gen.go); each member's value rule is a reader named
//     after its JSON path, checked against Kind, Required, MinLen/MaxLen, Pattern and
//     Secret by ingest's tests;
//   - the record codec (record.go): checked byte for byte against an encoder driven by
//     Pos, Wire, Bit, If and Since (event_test.go), and Event and Batch hold exactly the
//     declared Go fields;
//   - the consumer's column buffers (schema/sink/sink.go): its INSERT column list is Column and
//     CHType, in order (rollup's tests);
//   - the ClickHouse table (migrations/): the migrated events table has exactly these
//     columns and types (event_migration_test.go, on the real server);
//   - the OpenAPI schema of an event (api/docs): generated from JSON, Kind, Required,
//     MinLen/MaxLen, Format, Pattern and Doc;
//   - the Go client's wire type (api/client): its json tags and Go kinds are the JSON
//     members (api/client's tests).
//
// DESIGN.md, "Adding a field to the event", walks through adding one.

// Origin says where a column's value comes from.
type Origin uint8

const (
	// FromEvent: each event of a record (Event): a member the client sends in POST
	// /events, or the edge's form of one (an event_id's UUID, an email's SHA-256, the
	// presence of a value or an email).
	FromEvent Origin = iota
	// FromBatch: the record's header (Batch): the key and request that carried the batch,
	// the same for each of its events.
	FromBatch
	// FromConsumer: the consumer, at insert: derived from another column (event_date),
	// or from the record's place in Kafka and the flush.
	FromConsumer
)

// Kind is the JSON type of a member of an event in POST /events.
type Kind uint8

const (
	// NoMember: clients do not send it.
	NoMember Kind = iota
	String
	Number
	Bool
	// Object groups members: their paths are its own, a dot and their name.
	Object
)

// String is the kind's JSON Schema type: string, number, boolean, object ("" for
// NoMember).
func (k Kind) String() string {
	return [...]string{NoMember: "", String: "string", Number: "number", Bool: "boolean", Object: "object"}[k]
}

// Wire is how the record (record.go) carries a field.
type Wire uint8

const (
	// NotInRecord: the consumer derives or adds it.
	NotInRecord Wire = iota
	// Fixed: the bytes of the Go array as they are (UUIDs, the currency, the hash).
	Fixed
	// Bytes: an unsigned varint length, then the string's bytes.
	Bytes
	// Varint: the int64 as a zig-zag varint.
	Varint
	// Flag: bit Bit of the flags byte at Pos (a bool).
	Flag
)

// Field is one thing an event carries: a column of the events table, a member of an
// event in POST /events, or both; or an object of POST /events that groups members.
type Field struct {
	// Column and CHType: the column of events and its type as system.columns spells it
	// ("" for an object of the API).
	Column, CHType string
	// From is where the value comes from; Go is the field of Event (FromEvent) or Batch
	// (FromBatch) that holds it.
	From Origin
	Go   string

	// The record: Pos is the position in the field's section (the header for FromBatch,
	// each event for FromEvent; 1 first, after magic and version in the header); several
	// Flags share one position, the flags byte. If names the section's Flag field without
	// which the value is left out. Since is the record version that added the field (0:
	// the first).
	Pos   int
	Wire  Wire
	Bit   uint8
	If    string
	Since uint8

	// POST /events: the member's JSON path ("consent.measurement"), its JSON type and
	// rules. Required: an event without it is rejected (rule required); RequiredWith:
	// required when that member has a value. MinLen and MaxLen bound a string's
	// characters, as JSON Schema's minLength and maxLength (0: no bound); a Number's
	// bounds are its column's Decimal(P, S). Format and Pattern are JSON Schema's. Secret: a contact detail, never echoed in a rejection. Example
	// is a valid value, as JSON.
	JSON         string
	Kind         Kind
	Required     bool
	RequiredWith string
	MinLen       int
	MaxLen       int
	Format       string
	Pattern      string
	Secret       bool
	Example      string

	// Doc is the member's description in the API (OpenAPI), or the column's meaning.
	Doc string
}

// Bounds of event members (documented on the developer pages).
const (
	MaxEventIDLen = 64
	MaxEmailLen   = 254
)

// EventFields declares the event: every column of the events table in table order, and
// the objects of POST /events before their members.
var EventFields = []Field{
	{Column: "workspace_id", CHType: "UUID", From: FromBatch, Go: "Workspace", Pos: 2, Wire: Fixed,
		Doc: "Workspace of the key that sent the event."},
	{Column: "pixel_id", CHType: "UUID", From: FromBatch, Go: "Pixel", Pos: 3, Wire: Fixed,
		Doc: "The pixel (pxl_<uuid> in the API is this UUID)."},
	{Column: "sandbox", CHType: "UInt8", From: FromBatch, Go: "Sandbox", Pos: 1, Wire: Flag, Bit: 0,
		Doc: "1 if sent with a sandbox key."},
	{Column: "key_id", CHType: "UUID", From: FromBatch, Go: "Key", Pos: 4, Wire: Fixed,
		Doc: "The API key that sent the batch."},
	{Column: "event_id", CHType: "UUID", Go: "ID", Pos: 1, Wire: Fixed,
		JSON: "event_id", Kind: String, MinLen: 1, MaxLen: MaxEventIDLen, Example: `"order-1001"`,
		Doc: "Optional: deduplicates per pixel. The first accepted copy of an event_id is stored; every later copy accepted within 48 hours of it is dropped (within one batch it is refused, rule duplicate_event_id)."},
	{Column: "event_name", CHType: "String", Go: "Name", Pos: 2, Wire: Bytes,
		JSON: "event_name", Kind: String, Required: true, MinLen: 1, MaxLen: MaxNameLen, Example: `"purchase"`,
		Doc: "Name of the event, e.g. purchase."},
	{Column: "occurred_at", CHType: "DateTime('UTC')", Go: "OccurredAt", Pos: 3, Wire: Varint,
		JSON: "occurred_at", Kind: String, Required: true, Format: "date-time", Pattern: "Z$", Example: `"2026-11-24T11:59:00Z"`,
		Doc: "When it happened: RFC 3339 UTC with Z; at most 7 days old, 5 minutes ahead."},
	{Column: "event_date", CHType: "Date", From: FromConsumer,
		Doc: "UTC day of occurred_at: the rollup day."},
	{Column: "value", CHType: "Decimal(18, 4)", Go: "Value", Pos: 5, Wire: Varint, If: "HasValue",
		JSON: "value", Kind: Number, Example: `12.5`,
		Doc: "Monetary value; at most 4 decimals; needs currency."},
	{Column: "has_value", CHType: "UInt8", Go: "HasValue", Pos: 4, Wire: Flag, Bit: 0,
		Doc: "1 if the event carried a value."},
	{Column: "currency", CHType: "String", Go: "Currency", Pos: 6, Wire: Fixed,
		JSON: "currency", Kind: String, RequiredWith: "value", Pattern: "^[A-Z]{3}$", Example: `"EUR"`,
		Doc: "ISO 4217 currency code."},
	{JSON: "consent", Kind: Object, Required: true,
		Doc: "Consent captured for the person."},
	{Column: "consent", CHType: "UInt8", Go: "Consent", Pos: 4, Wire: Flag, Bit: 1,
		JSON: "consent.measurement", Kind: Bool, Required: true, Example: `true`,
		Doc: "false: identity is discarded at the edge; the event counts, flagged unconsented."},
	{Column: "has_email", CHType: "UInt8", Go: "HasEmail", Pos: 4, Wire: Flag, Bit: 2,
		Doc: "1 if an email hash is present (only with consent)."},
	{JSON: "identity", Kind: Object, Secret: true,
		Doc: "Contact details, hashed with SHA-256 by the service before storage."},
	{Column: "email_sha256", CHType: "FixedString(32)", Go: "EmailSHA", Pos: 7, Wire: Fixed, If: "HasEmail",
		JSON: "identity.email", Kind: String, MaxLen: MaxEmailLen, Secret: true, Example: `"ada@example.com"`,
		Doc: "Trimmed and lower-cased by the sender; an address that is not is rejected (rule normalised)."},
	{Column: "request_id", CHType: "String", From: FromBatch, Go: "RequestID", Pos: 6, Wire: Bytes,
		Doc: "The API request that carried the batch."},
	{Column: "received_at", CHType: "DateTime('UTC')", From: FromBatch, Go: "ReceivedAt", Pos: 5, Wire: Varint,
		Doc: "When the edge accepted the batch."},
	{Column: "inserted_at", CHType: "DateTime('UTC')", From: FromConsumer,
		Doc: "When the consumer wrote it (one value per insert)."},
	{Column: "kafka_topic", CHType: "String", From: FromConsumer,
		Doc: "The topic's label, events.v1@<topic id>: origin in Kafka."},
	{Column: "kafka_partition", CHType: "Int32", From: FromConsumer,
		Doc: "Kafka partition of the record."},
	{Column: "kafka_offset", CHType: "Int64", From: FromConsumer,
		Doc: "Kafka offset of the record."},
	{Column: "batch_index", CHType: "UInt8", From: FromConsumer,
		Doc: "Position of the event in its record."},
}
