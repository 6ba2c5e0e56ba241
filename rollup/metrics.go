package rollup

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"svc/schema"
)

// metrics of the rollup role; rollup/README.md documents each.
type metrics struct {
	rowsInserted  prometheus.Counter
	flushDuration prometheus.Histogram
	batchRows     prometheus.Histogram
	eventAge      *ageHistogram          // {clock="received"|"occurred"}
	partitionLag  *prometheus.GaugeVec   // {partition}
	deadLetters   *prometheus.CounterVec // {reason}
	insertErrors  prometheus.Counter
	commitErrors  prometheus.Counter
	skipped       prometheus.Counter
	duplicates    prometheus.Counter
	// duplicateEvents counts copies of client event ids dropped (eventdedup.go).
	duplicateEvents prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	ageBuckets := []float64{.05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 3600, 86400}
	m := &metrics{
		rowsInserted: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_rows_inserted_total", Help: "Events inserted into ClickHouse."})),
		flushDuration: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_rollup_flush_duration_seconds", Help: "Duration of one successful INSERT.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)})),
		batchRows: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_rollup_batch_rows", Help: "Rows per INSERT.",
			Buckets: prometheus.ExponentialBuckets(100, 2, 15)})),
		eventAge: register(reg, newAgeHistogram("svc_rollup_event_age_seconds",
			"Age of an event when its INSERT completed: since the edge accepted it (clock=received) or since it happened (clock=occurred).",
			ageBuckets)),
		partitionLag: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_rollup_partition_lag", Help: "Records in the partition after the last one this consumer read (high watermark - next offset)."},
			[]string{"partition"})),
		deadLetters: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_rollup_dead_letters_total", Help: "Records sent to the dead-letter topic, by reason."},
			[]string{"reason"})),
		insertErrors: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_insert_errors_total", Help: "Failed attempts to reach ClickHouse (INSERT, stored-offset read-back) or to produce dead letters; each is retried with backoff."})),
		commitErrors: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_commit_errors_total", Help: "Failed offset commits (harmless: stored offsets are re-read on assignment)."})),
		duplicates: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_duplicate_batches_total", Help: "Records skipped as a second copy of a batch already stored (same svc-batch id)."})),
		duplicateEvents: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_duplicate_events_total", Help: "Events dropped as a copy of a client event_id already stored for the pixel within the window (SVC_EVENT_ID_WINDOW)."})),
		skipped: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_rollup_skipped_records_total", Help: "Records skipped because ClickHouse already holds them (redelivery after a crash or rebalance)."})),
	}
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "svc_rollup_claim_table_bytes", Help: "Memory of the claim tables (client event ids and batch ids) of the partitions the process's consumers own; tables of 16 KiB or more are mapped outside Go's heap."},
		func() float64 { return float64(claimTableBytes.Load()) }))
	return m
}

// register registers c, or returns the collector already registered under the same
// description, so several consumers in one process (tests, svc dev) share metrics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex
			}
		}
		panic(err)
	}
	return c
}

// Dead-letter reasons: the metric label and the svc-dlq-reason header's first word.
const (
	ReasonBadMagic    = "bad_magic"
	ReasonVersion     = "unsupported_version"
	ReasonMalformed   = "malformed"
	ReasonOutOfRange  = "out_of_range"
	ReasonWrongSchema = "wrong_schema_header"
)

// reasonOf classifies a decoding error into a low-cardinality reason.
func reasonOf(err error) string {
	if !errors.Is(err, schema.ErrRecord) {
		return ReasonMalformed
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "bad magic"):
		return ReasonBadMagic
	case strings.Contains(s, "unsupported version"):
		return ReasonVersion
	case strings.Contains(s, "out of range"):
		return ReasonOutOfRange
	}
	return ReasonMalformed
}
