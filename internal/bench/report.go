package bench

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what one run measured. Values the bench could not measure (the
// CPU time of a Herald it did not start) are nil, null in JSON.
type Report struct {
	Target     Target         `json:"target"`
	Load       Load           `json:"load"`
	Events     EventCounts    `json:"events"`
	Deliveries DeliveryCounts `json:"deliveries"`
	LatencyMS  LatencyMS      `json:"latency_ms"`
	// IngestCallMS is the round trip of the accepted ingest calls, from
	// sending the call to its answer: what a caller waits for an accept.
	IngestCallMS LatencyMS       `json:"ingest_call_ms"`
	Attempts     AttemptCounts   `json:"attempts"`
	Herald       HeraldResources `json:"herald"`
	// IdleEndpoints is set when the run made idle endpoints.
	IdleEndpoints *IdleEndpoints `json:"idle_endpoints,omitempty"`
	// Idle is set when the run measured the node at rest (--idle).
	Idle *IdleReport `json:"idle,omitempty"`
	// Soak is set for a soak (--soak): its rows.
	Soak *SoakReport `json:"soak,omitempty"`
	// Hanging is set when the run had hanging endpoints
	// (--hanging-endpoints): what they were sent and held. The other
	// figures leave them out.
	Hanging *HangingReport `json:"hanging,omitempty"`
	// BenchCPUSeconds is the CPU time the bench itself (sender and
	// receiver) used from the start of sending to the end of the drain: on
	// one machine it competes with Herald for the same cores.
	BenchCPUSeconds *float64 `json:"bench_cpu_seconds"`
	// Interrupted is set when the run was stopped before it finished; the
	// counts are then partial.
	Interrupted bool `json:"interrupted"`
	// Notes say how to read the numbers.
	Notes []string `json:"notes"`
}

// Target is the Herald measured.
type Target struct {
	// Mode is "spawn" (the bench started it) or "server" (it was running).
	Mode string `json:"mode"`
	URL  string `json:"url"`
	// DB is "sqlite" or "postgres" for a spawned Herald, "" otherwise.
	DB string `json:"db,omitempty"`
	// ServeArgs are the extra flags a spawned Herald was given.
	ServeArgs []string `json:"serve_args,omitempty"`
}

// Load is the load that was asked for.
type Load struct {
	Endpoints int `json:"endpoints"`
	Consumers int `json:"consumers"`
	Fanout    int `json:"fanout"`
	Events    int `json:"events,omitempty"`
	// DurationSeconds is the --duration, when the run was bounded by time.
	DurationSeconds float64 `json:"duration_seconds,omitempty"`
	// Rate is events a second; 0 means as fast as accepted.
	Rate        float64 `json:"rate"`
	Batch       int     `json:"batch"`
	Connections int     `json:"connections"`
	PayloadSize int     `json:"payload_size"`
	PayloadKind string  `json:"payload_kind,omitempty"`
	Verify      bool    `json:"verify"`
	// ReceiverDelayMS is how long the receiver took to answer each
	// delivery (--receiver-delay); MaxInFlight each endpoint's
	// max_in_flight (--max-in-flight, 0: Herald's default).
	ReceiverDelayMS float64 `json:"receiver_delay_ms,omitempty"`
	MaxInFlight     int     `json:"max_in_flight,omitempty"`
	// IdleEndpoints is the --idle-endpoints made besides Endpoints.
	IdleEndpoints int `json:"idle_endpoints"`
	// IdleSeconds is the --idle, SoakSeconds the --soak.
	IdleSeconds float64 `json:"idle_seconds,omitempty"`
	SoakSeconds float64 `json:"soak_seconds,omitempty"`
}

// IdleEndpoints is how the idle endpoints were made.
type IdleEndpoints struct {
	Count int `json:"count"`
	// CreateSeconds is how long creating them took, over Connections
	// concurrent POST /v1/endpoints calls; PerSecond is Count over it.
	CreateSeconds float64 `json:"create_seconds"`
	PerSecond     float64 `json:"per_second"`
	Connections   int     `json:"connections"`
}

// IdleReport is what the node cost at rest, over Seconds after the
// endpoints were made and before any load. Nil values were not measured.
type IdleReport struct {
	Seconds float64 `json:"seconds"`
	// HeraldCPUSeconds is the spawned Herald's user and system CPU time;
	// HeraldCorePercent is that over Seconds, in % of one core.
	HeraldCPUSeconds  *float64 `json:"herald_cpu_seconds"`
	HeraldCorePercent *float64 `json:"herald_core_percent"`
	// PostgresCPUSeconds is the CPU time of the backends of the spawned
	// Herald's PostgreSQL database (Herald's connections, autovacuum on
	// it), read from /proc; PostgresCorePercent is that in % of one core.
	// PostgresBackends is how many there were at the end, and
	// PostgresTransactions how many transactions the database counted
	// (pg_stat_database, whose counts lag by up to ~10 s).
	PostgresCPUSeconds   *float64 `json:"postgres_cpu_seconds,omitempty"`
	PostgresCorePercent  *float64 `json:"postgres_core_percent,omitempty"`
	PostgresBackends     *int     `json:"postgres_backends,omitempty"`
	PostgresTransactions *int64   `json:"postgres_transactions,omitempty"`
	// PostgresError says why PostgreSQL's side could not be read.
	PostgresError string `json:"postgres_error,omitempty"`
}

// SoakReport is a soak's rows.
type SoakReport struct {
	// EverySeconds is the length of a row (60 unless --soak-every).
	EverySeconds float64 `json:"every_seconds"`
	// Tables says what the table columns mean on this database.
	Tables string    `json:"tables"`
	Rows   []SoakRow `json:"rows"`
	// P99Ratio is the last row's p99 over the first's (rows without
	// deliveries passed over); nil when there were not two such rows.
	P99Ratio *float64 `json:"p99_ratio"`
	// LateDeliveries were recorded after their row was made, and are in
	// none.
	LateDeliveries int64 `json:"late_deliveries,omitempty"`
}

// SoakRow is one window of a soak (a minute unless --soak-every):
// deliveries by the time they arrived (the last row also takes those
// that arrived while draining), and the hot tables at its end.
type SoakRow struct {
	// Minute counts the windows from 1.
	Minute     int     `json:"minute"`
	Deliveries int     `json:"deliveries"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	// Tables are the hot tables that exist; none with --server.
	Tables []TableRows `json:"tables,omitempty"`
	// FreelistPages and Pages are SQLite's PRAGMA freelist_count and
	// page_count: the pages of the file that deleted rows left empty
	// (reused before the file grows), of all its pages.
	FreelistPages *int64 `json:"freelist_pages,omitempty"`
	Pages         *int64 `json:"pages,omitempty"`
	// TablesError says why the tables could not be read this time.
	TablesError string `json:"tables_error,omitempty"`
}

// EventCounts are the ingest side.
type EventCounts struct {
	// Sent is how many events went out in ingest calls, Accepted how many
	// Herald answered 2xx for, Failed how many were in calls that failed
	// (calls cut short by an interrupt are in Sent only).
	Sent     int64 `json:"sent"`
	Accepted int64 `json:"accepted"`
	Failed   int64 `json:"failed"`
	// FirstError is the first failure, if any.
	FirstError string `json:"first_error,omitempty"`
	// FanoutMismatches counts accepted events whose answer listed a
	// different number of deliveries than the fanout, or an endpoint the
	// bench did not create.
	FanoutMismatches int64 `json:"fanout_mismatches"`
	// PerSecond is Accepted over SendSeconds, the time from the first
	// ingest call to the answer of the last.
	PerSecond   float64 `json:"per_second"`
	SendSeconds float64 `json:"send_seconds"`
}

// DeliveryCounts are the receiver side.
type DeliveryCounts struct {
	// Expected is how many deliveries the accepted events made; Delivered
	// how many of them arrived; Missing how many never did within the
	// drain; Duplicated how many arrived more than once, and Repeats the
	// arrivals beyond each one's first; Unexpected how many arrived that no
	// accepted answer listed (or that carried no webhook id).
	Expected   int64 `json:"expected"`
	Delivered  int64 `json:"delivered"`
	Missing    int64 `json:"missing"`
	Duplicated int64 `json:"duplicated"`
	Repeats    int64 `json:"repeats"`
	Unexpected int64 `json:"unexpected"`
	// ArrivedBeforeAccept counts deliveries that reached the receiver
	// before their ingest answer reached the sender (latency 0).
	ArrivedBeforeAccept int64 `json:"arrived_before_accept"`
	// PerSecond is Delivered over WindowSeconds, from the first accept to
	// the last arrival.
	PerSecond     float64 `json:"per_second"`
	WindowSeconds float64 `json:"window_seconds"`
	// Drained is whether every expected delivery arrived before
	// --drain-timeout; DrainSeconds how long the wait after sending took.
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_seconds"`
	// MissingSample names a few missing deliveries as event_id#endpoint.
	MissingSample []string `json:"missing_sample,omitempty"`
	// InvalidSignatures and ChangedBodies are counted with --verify only.
	InvalidSignatures *int64 `json:"invalid_signatures,omitempty"`
	ChangedBodies     *int64 `json:"changed_bodies,omitempty"`
}

// LatencyMS is the end-to-end latency in milliseconds, from the ingest
// answer reaching the bench to the delivery reaching the receiver.
type LatencyMS struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// AttemptCounts are the HTTP attempts Herald made in the delivery window.
type AttemptCounts struct {
	Total     float64 `json:"total"`
	PerSecond float64 `json:"per_second"`
	// Source is "herald_attempts_total" when read from the server's
	// /metrics, "deliveries" when /metrics had no such counter and the
	// deliveries stand in for attempts.
	Source string `json:"source"`
}

// HeraldResources is what the spawned Herald cost; nil when not measured.
type HeraldResources struct {
	// CPUSeconds is user and system CPU time from the start of sending to
	// the end of the drain.
	CPUSeconds *float64 `json:"cpu_seconds"`
	// CoresBusy is CPUSeconds over that wall time.
	CoresBusy *float64 `json:"cores_busy"`
	// DeliveriesPerCPUSecond is Delivered over CPUSeconds: what one core
	// does, ingest and delivery together.
	DeliveriesPerCPUSecond *float64 `json:"deliveries_per_cpu_second"`
	// PeakRSSBytes is the most resident memory the process held (VmHWM),
	// over its whole life.
	PeakRSSBytes *int64 `json:"peak_rss_bytes"`
	// PostgresCPUSeconds is, on PostgreSQL, the CPU time of the backends
	// of Herald's database over the same time (read from /proc, as for
	// --idle); PostgresError says why it could not be read.
	PostgresCPUSeconds *float64 `json:"postgres_cpu_seconds,omitempty"`
	PostgresError      string   `json:"postgres_error,omitempty"`
	// PostgresWALBytes is, on PostgreSQL, the write-ahead log the server
	// wrote over the same time (pg_current_wal_lsn before and after): every
	// database's, so Herald's alone when nothing else writes to the server.
	// WALBytesPerDelivery is it over the deliveries.
	PostgresWALBytes    *int64   `json:"postgres_wal_bytes,omitempty"`
	WALBytesPerDelivery *float64 `json:"wal_bytes_per_delivery,omitempty"`
	// CPUMSPerDelivery is Herald's CPU time, and on PostgreSQL its
	// database's too, over the deliveries, in milliseconds: what one
	// delivery costs the machine, ingest to outcome.
	CPUMSPerDelivery *float64 `json:"cpu_ms_per_delivery,omitempty"`
}

// The notes every report carries.
const (
	noteIngestCall = "ingest_call_ms is each accepted ingest call's round trip, from sending it to its answer (samples are calls, not events)"
	noteLatency    = "latency is from the ingest answer reaching the bench to the delivery reaching the bench's receiver; it includes about half the ingest call's round trip"
	noteShared     = "the bench's sender and receiver run on the same machine as Herald and share its cores (see bench_cpu_seconds)"
	noteWindow     = "deliveries/s and attempts/s are over the window from the first accepted event to the last arrival"
	noteIdle       = "idle CPU is read from /proc in 10 ms steps, over the idle time after the endpoints were made and before any load; 100 % is one core"
)

func deref32(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// WriteText writes the report as a table for a person.
func (r *Report) WriteText(w io.Writer) error {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	row := func(name, value, detail string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, value, detail) }

	l := r.Load
	amount := fmt.Sprintf("%d events", l.Events)
	if l.DurationSeconds > 0 {
		amount = "events for " + (time.Duration(l.DurationSeconds * float64(time.Second))).String()
	}
	rate := "as fast as accepted"
	if l.Rate > 0 {
		rate = fmt.Sprintf("%s events/s", num(l.Rate))
	}
	if l.SoakSeconds > 0 {
		amount = "a soak of " + (time.Duration(l.SoakSeconds * float64(time.Second))).String()
	}
	idle := ""
	if l.IdleEndpoints > 0 {
		idle = fmt.Sprintf(", beside %s", plural(l.IdleEndpoints, "idle endpoint"))
	}
	noLoad := l.Events == 0 && l.DurationSeconds == 0
	if noLoad {
		fmt.Fprintf(w, "herald bench: no load, idle for %s, %s of %s%s\n",
			(time.Duration(l.IdleSeconds * float64(time.Second))).String(),
			plural(l.Endpoints, "endpoint"), plural(l.Consumers, "consumer"), idle)
	} else {
		receiver := ""
		if l.MaxInFlight > 0 {
			receiver += fmt.Sprintf(", %d in flight an endpoint", l.MaxInFlight)
		}
		if l.ReceiverDelayMS > 0 {
			receiver += ", receivers answering in " + (time.Duration(l.ReceiverDelayMS * float64(time.Millisecond))).String()
		}
		kind := ""
		if l.PayloadKind == PayloadOrder {
			kind = " order"
		}
		fmt.Fprintf(w, "herald bench: %s, %s, to %s of %s (fanout %d)%s, batch %d, %s, %d-byte%s payloads%s\n",
			amount, rate, plural(l.Endpoints, "endpoint"), plural(l.Consumers, "consumer"), l.Fanout, idle, l.Batch,
			plural(l.Connections, "connection"), l.PayloadSize, kind, receiver)
	}
	switch r.Target.Mode {
	case "spawn":
		extra := ""
		if len(r.Target.ServeArgs) > 0 {
			extra = " " + strings.Join(r.Target.ServeArgs, " ")
		}
		fmt.Fprintf(w, "target: herald serve%s spawned on %s (%s)\n", extra, r.Target.URL, r.Target.DB)
	default:
		fmt.Fprintf(w, "target: %s\n", r.Target.URL)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the counts below are partial")
	}
	fmt.Fprintln(w)

	if h := r.Hanging; h != nil {
		timeout := "Herald's default timeout"
		if h.TimeoutSeconds > 0 {
			timeout = "a timeout of " + (time.Duration(h.TimeoutSeconds * float64(time.Second))).String()
		}
		row("hanging endpoints", strconv.Itoa(h.Endpoints), fmt.Sprintf("receivers that never answer, %s; sent %d events (%s/s), %d accepted, %d failed; held %d attempts, at most %d at once; left out of the figures below",
			timeout, h.Sent, num(h.Rate), h.Accepted, h.Failed, h.Arrived, h.PeakOpen))
	}
	if ie := r.IdleEndpoints; ie != nil {
		row("idle endpoints", strconv.Itoa(ie.Count), fmt.Sprintf("created in %s s (%s/s over %s)", secs(ie.CreateSeconds), num(ie.PerSecond), plural(ie.Connections, "connection")))
	}
	if id := r.Idle; id != nil {
		cpu, detail := "unknown", "not measured: Herald was not started by the bench"
		if id.HeraldCorePercent != nil {
			cpu = num(*id.HeraldCorePercent) + " %"
			detail = fmt.Sprintf("of one core: %s CPU s over %s s idle", secs(*id.HeraldCPUSeconds), secs(id.Seconds))
		}
		row("idle herald CPU", cpu, detail)
		if id.PostgresCorePercent != nil {
			row("idle postgres CPU", num(*id.PostgresCorePercent)+" %",
				fmt.Sprintf("of one core: %s CPU s of the database's %d backends; %d transactions", secs(*id.PostgresCPUSeconds), deref32(id.PostgresBackends), deref(id.PostgresTransactions)))
		} else if id.PostgresError != "" {
			row("idle postgres CPU", "unknown", id.PostgresError)
		}
	}
	if noLoad {
		return r.finishText(w, tw, &table)
	}

	e, d := r.Events, r.Deliveries
	failed := ""
	if e.Failed > 0 {
		failed = fmt.Sprintf("%d failed, first: %s", e.Failed, e.FirstError)
	}
	row("events accepted", strconv.FormatInt(e.Accepted, 10), failed)
	row("events accepted/s", num(e.PerSecond), fmt.Sprintf("over %s s of sending", secs(e.SendSeconds)))
	row("deliveries", strconv.FormatInt(d.Delivered, 10), fmt.Sprintf("of %d expected", d.Expected))
	missing := ""
	if d.Missing > 0 {
		missing = "e.g. " + strings.Join(d.MissingSample, ", ")
	}
	row("missing", strconv.FormatInt(d.Missing, 10), missing)
	row("duplicated", strconv.FormatInt(d.Duplicated, 10), fmt.Sprintf("%d extra arrivals", d.Repeats))
	if d.Unexpected > 0 {
		row("unexpected", strconv.FormatInt(d.Unexpected, 10), "arrived but not in any accepted answer")
	}
	if e.FanoutMismatches > 0 {
		row("fanout mismatches", strconv.FormatInt(e.FanoutMismatches, 10), "events whose answer listed other deliveries than expected")
	}
	if d.InvalidSignatures != nil {
		row("invalid signatures", strconv.FormatInt(*d.InvalidSignatures, 10), "")
	}
	if d.ChangedBodies != nil {
		row("changed bodies", strconv.FormatInt(*d.ChangedBodies, 10), "body differs from the payload sent")
	}
	drain := fmt.Sprintf("drained in %s s", secs(d.DrainSeconds))
	if !d.Drained {
		drain = fmt.Sprintf("NOT drained: gave up after %s s", secs(d.DrainSeconds))
	}
	row("deliveries/s", num(d.PerSecond), fmt.Sprintf("over %s s, first accept to last arrival; %s", secs(d.WindowSeconds), drain))
	lat := r.LatencyMS
	row("latency p50", ms(lat.P50), fmt.Sprintf("accept to arrival, %d deliveries", lat.Samples))
	row("latency p90", ms(lat.P90), "")
	row("latency p99", ms(lat.P99), "")
	row("latency max", ms(lat.Max), "")
	if c := r.IngestCallMS; c.Samples > 0 {
		row("ingest call p50", ms(c.P50), fmt.Sprintf("sent to answered, %d calls", c.Samples))
		row("ingest call p99", ms(c.P99), "")
	}
	row("attempts/s", num(r.Attempts.PerSecond), "from "+r.Attempts.Source)
	h := r.Herald
	cpu, cpuDetail := "unknown", "not measured: Herald was not started by the bench"
	if h.CPUSeconds != nil {
		cpu = secs(*h.CPUSeconds) + " s"
		cpuDetail = ""
		if h.CoresBusy != nil {
			cpuDetail = num(*h.CoresBusy) + " cores busy"
		}
		if h.DeliveriesPerCPUSecond != nil {
			cpuDetail += fmt.Sprintf(", %s deliveries per CPU second", num(*h.DeliveriesPerCPUSecond))
		}
	}
	row("herald CPU", cpu, cpuDetail)
	if h.PostgresCPUSeconds != nil {
		detail := ""
		if wall := r.Deliveries.WindowSeconds; wall > 0 {
			detail = "the database's backends, about " + num(*h.PostgresCPUSeconds/wall) + " cores busy"
		}
		row("postgres CPU", secs(*h.PostgresCPUSeconds)+" s", detail)
	} else if h.PostgresError != "" {
		row("postgres CPU", "unknown", h.PostgresError)
	}
	if h.PostgresWALBytes != nil {
		detail := "the server's, every database's"
		if h.WALBytesPerDelivery != nil {
			detail = fmt.Sprintf("%.0f bytes a delivery; %s", *h.WALBytesPerDelivery, detail)
		}
		row("postgres WAL", fmt.Sprintf("%.1f MiB", float64(*h.PostgresWALBytes)/(1<<20)), detail)
	}
	if h.CPUMSPerDelivery != nil {
		who := "Herald's"
		if h.PostgresCPUSeconds != nil {
			who = "Herald's and its database's"
		}
		row("CPU per delivery", ms(*h.CPUMSPerDelivery), who+" CPU time over the deliveries")
	}
	rss := "unknown"
	if h.PeakRSSBytes != nil {
		rss = fmt.Sprintf("%.1f MiB", float64(*h.PeakRSSBytes)/(1<<20))
	}
	row("herald peak RSS", rss, "")
	if r.BenchCPUSeconds != nil {
		row("bench CPU", secs(*r.BenchCPUSeconds)+" s", "sender and receiver, same machine")
	}
	return r.finishText(w, tw, &table)
}

// finishText writes the table, the soak's rows and the notes.
func (r *Report) finishText(w io.Writer, tw *tabwriter.Writer, table *bytes.Buffer) error {
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	if r.Soak != nil {
		writeSoak(w, r.Soak)
	}
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// num formats a measured value with about four significant digits.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// secs formats seconds to the millisecond, or to the tenth past 100 s.
func secs(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func ms(v float64) string { return num(v) + " ms" }
