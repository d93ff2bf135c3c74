// Package bench measures a Herald: how many events a second it accepts, how
// many deliveries a second it makes, how long an event takes from its
// accepted ingest call to its arrival at an endpoint, and, when the bench
// started the Herald itself, what CPU time and memory that cost.
//
// A run starts a `herald serve` child (or uses a running Herald on this
// machine), starts its own receiver on 127.0.0.1, creates endpoints that
// deliver to it, sends events over a fixed number of connections, waits for
// the deliveries to drain, and reports (Report). The counting is done by a
// Tally, which knows nothing of HTTP and is tested on planted data.
//
// It measures load on the machine it runs on, and nothing else: a server
// must be on a loopback address, and counts and durations are bounded.
package bench

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/client"
)

// Bounds on a run, so that a typo cannot start a load that does not end.
const (
	// MaxEvents is the most events (and the most expected deliveries) one
	// run sends.
	MaxEvents = 10_000_000
	// MaxDuration is the longest --duration.
	MaxDuration = time.Hour
	// MaxEndpoints is the most endpoints one run creates.
	MaxEndpoints = 10_000
	// MaxBatch is the most events in one batch call (the API's limit).
	MaxBatch = 1000
	// MaxConnections is the most concurrent ingest connections.
	MaxConnections = 1024
	// MinPayloadSize is the smallest payload: {"pad":""}.
	MinPayloadSize = len(`{"pad":""}`)
	// PayloadPad is a payload of one key padded with x to size:
	// {"pad":"xxx…"}.
	PayloadPad = "pad"
	// PayloadOrder is a shop's order in JSON (OrderPayload).
	PayloadOrder = "order"
	// MaxPayloadSize is the largest payload. A spawned Herald accepts
	// 256 KiB unless given --max-payload-bytes.
	MaxPayloadSize = 1 << 20
	// MaxDrainTimeout is the longest wait for deliveries after sending.
	MaxDrainTimeout = time.Hour
	// MaxIdleEndpoints is the most idle endpoints one run creates.
	MaxIdleEndpoints = 1_000_000
	// MaxIdle is the longest --idle.
	MaxIdle = time.Hour
	// MaxReceiverDelay is the longest --receiver-delay: past Herald's
	// longest endpoint timeout, a receiver that never answers.
	MaxReceiverDelay = 2 * time.Minute
	// MaxHangingRate bounds the events a second sent to hanging
	// endpoints; MaxHangingTimeout their timeout (Herald's own bound).
	MaxHangingRate    = 10_000
	MaxHangingTimeout = time.Minute
	// MaxMaxInFlight is the largest --max-in-flight, as the API allows.
	MaxMaxInFlight = 1000
	// MinSoakEvery is the shortest --soak-every: a row reads the hot
	// tables, which costs the database a little each time.
	MinSoakEvery = time.Second
)

// Defaults of the options.
const (
	DefaultEvents       = 10_000
	DefaultEndpoints    = 100
	DefaultConnections  = 8
	DefaultPayloadSize  = 1024
	DefaultDrainTimeout = time.Minute
	// DefaultSoakEvery is how often a soak prints a row.
	DefaultSoakEvery = time.Minute
	// IdleWorkers is how many calls create the idle endpoints at once.
	IdleWorkers = 32
)

// Options describe one run. The zero value of a field means its default
// where one is given.
type Options struct {
	// Server is the address of a running Herald to measure, which must be
	// on 127.0.0.1, localhost or ::1; "" means spawn one.
	Server string
	// APIKey is the key for Server's /v1 calls (a spawned Herald gets a
	// fresh one).
	APIKey string
	// Binary is the herald binary to spawn; "" means the running one.
	Binary string
	// DB is the --db of the spawned Herald; "" means a fresh SQLite file in
	// a temporary directory, removed afterwards.
	DB string
	// ServeArgs are more flags for the spawned `herald serve`
	// (--concurrency 128, say).
	ServeArgs []string

	// Endpoints is how many endpoints to create (DefaultEndpoints).
	Endpoints int
	// Fanout is how many endpoints each event reaches (1).
	Fanout int
	// Consumers is how many consumers own the endpoints: each group of
	// Fanout endpoints belongs to one consumer, group g to consumer
	// g mod Consumers. 0 means one consumer per group (Endpoints/Fanout).
	Consumers int

	// Events is how many events to send; 0 with Duration set means as many
	// as Duration allows (at most MaxEvents), 0 without it DefaultEvents.
	Events int
	// Duration bounds the sending time; 0 means until Events are sent.
	Duration time.Duration
	// Rate is events a second; 0 means as fast as Herald accepts them.
	Rate float64
	// Batch is events per ingest call: 1 uses POST /v1/events, more
	// POST /v1/events/batch.
	Batch int
	// Connections is how many ingest calls are in flight at once
	// (DefaultConnections).
	Connections int
	// PayloadSize is each event's payload size in bytes, a JSON object
	// padded to size (DefaultPayloadSize).
	PayloadSize int
	// PayloadKind is what a payload holds: PayloadPad (the default), or
	// PayloadOrder, which compresses as JSON sent by a shop does.
	PayloadKind string
	// DrainTimeout bounds the wait for deliveries after sending stops
	// (DefaultDrainTimeout).
	DrainTimeout time.Duration
	// Verify checks every delivery's signature and body at the receiver,
	// which costs the bench CPU time that Herald shares on one machine.
	Verify bool
	// ReceiverDelay is how long the receiver takes to answer each
	// delivery (a slow receiver); a delivery counts as arrived when it
	// comes, its answer follows ReceiverDelay later.
	ReceiverDelay time.Duration
	// MaxInFlight is each endpoint's max_in_flight; 0 leaves Herald's
	// default.
	MaxInFlight int

	// IdleEndpoints is how many idle endpoints to create before the load,
	// each of its own consumer (idle_000001, ...), enabled, delivering to
	// the bench's receiver, subscribed to an event type the load never
	// sends: they show what endpoints that have no work cost.
	IdleEndpoints int
	// HangingEndpoints is how many endpoints to make besides Endpoints
	// whose receiver never answers: it holds each request until Herald
	// gives up on it. They are sent HangingRate events a second (by
	// default one an endpoint every ten seconds) beside the load, each of
	// its own consumer, and have the timeout HangingTimeout (Herald's
	// default when 0). The latency and counts reported are the load's
	// alone: set beside a run without them, they show what hanging
	// receivers cost the healthy ones.
	HangingEndpoints int
	HangingRate      float64
	HangingTimeout   time.Duration

	// Idle, when set, holds the node without load for this long after the
	// endpoints are made and before the load, and measures the CPU Herald
	// (and, on PostgreSQL, its database backends) used meanwhile. With no
	// Events, Duration or Soak, the run sends nothing: it measures the
	// idle node alone.
	Idle time.Duration
	// Soak runs the load for this long (as Duration would) and reports a
	// row every SoakEvery: the deliveries that arrived in it, their
	// latency, and the rows and dead rows of the hot tables. It takes the
	// place of Duration and Events.
	Soak time.Duration
	// SoakEvery is the length of a soak row (DefaultSoakEvery).
	SoakEvery time.Duration

	// Progress, when set, receives a line every few seconds while the run
	// goes on.
	Progress io.Writer
	// ProgressEvery is how often (5 s when 0).
	ProgressEvery time.Duration
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Endpoints == 0 {
		o.Endpoints = DefaultEndpoints
	}
	if o.Fanout == 0 {
		o.Fanout = 1
	}
	if o.Consumers == 0 && o.Fanout > 0 && o.Endpoints > 0 {
		o.Consumers = o.Endpoints / o.Fanout
	}
	if o.Soak > 0 && o.Duration == 0 && o.Events == 0 {
		o.Duration = o.Soak
	}
	if o.Soak > 0 && o.SoakEvery == 0 {
		o.SoakEvery = DefaultSoakEvery
	}
	if o.Events == 0 && o.Duration == 0 && o.Idle == 0 {
		o.Events = DefaultEvents
	}
	if o.Batch == 0 {
		o.Batch = 1
	}
	if o.Connections == 0 {
		o.Connections = DefaultConnections
	}
	if o.PayloadKind == "" {
		o.PayloadKind = PayloadPad
	}
	if o.PayloadSize == 0 {
		o.PayloadSize = DefaultPayloadSize
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 5 * time.Second
	}
	return o
}

// Validate lists every problem with o (after defaults) at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// --soak takes the place of --duration and --events, so the clash is
	// judged on what was given, before the defaults.
	if o.Soak != 0 && o.Duration != 0 {
		bad("give --soak or --duration, not both: --soak D sends for D, as --duration D does, and reports a row every --soak-every")
	}
	if o.Soak != 0 && o.Events != 0 {
		bad("give --soak or --events, not both: a soak is bounded by time")
	}
	if o.SoakEvery != 0 && o.Soak == 0 {
		bad("--soak-every applies to --soak only")
	}
	o = o.withDefaults()

	if o.Server != "" {
		if err := CheckLoopback(o.Server); err != nil {
			errs = append(errs, err)
		}
		if o.APIKey == "" {
			bad("--api-key is required with --server")
		}
		if o.DB != "" || o.Binary != "" || len(o.ServeArgs) > 0 {
			bad("--db, --herald-binary and serve flags after -- apply to a spawned Herald, not to --server")
		}
	}
	for _, a := range o.ServeArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "addr" || name == "db" || name == "api-key") {
			bad("the bench sets the spawned serve's --%s itself (use the bench's --db for the database)", name)
		}
	}
	if o.Endpoints < 1 || o.Endpoints > MaxEndpoints {
		bad("--endpoints must be from 1 to %d", MaxEndpoints)
	}
	if o.Fanout < 1 || o.Fanout > o.Endpoints {
		bad("--fanout must be from 1 to --endpoints (%d)", o.Endpoints)
	} else if o.Endpoints%o.Fanout != 0 {
		bad("--endpoints (%d) must be a multiple of --fanout (%d): each event goes to one group of --fanout endpoints", o.Endpoints, o.Fanout)
	} else if groups := o.Endpoints / o.Fanout; o.Consumers < 1 || o.Consumers > groups {
		bad("--consumers must be from 1 to --endpoints / --fanout (%d)", groups)
	}
	if o.Events < 0 || o.Events > MaxEvents {
		bad("--events must be from 1 to %d", MaxEvents)
	}
	if o.Duration < 0 || o.Duration > MaxDuration {
		bad("--duration must be at most %s", MaxDuration)
	}
	if o.Events > 0 && o.Duration > 0 {
		bad("give --events or --duration, not both")
	}
	if o.Rate < 0 {
		bad("--rate must be 0 (as fast as accepted) or more")
	}
	if o.Duration > 0 && o.Rate > 0 && o.Rate*o.Duration.Seconds() > MaxEvents {
		bad("--rate × --duration is %.0f events, more than %d", o.Rate*o.Duration.Seconds(), MaxEvents)
	}
	if o.Events > 0 && o.Fanout > 0 && int64(o.Events)*int64(o.Fanout) > MaxEvents {
		bad("--events × --fanout is %d deliveries, more than %d", int64(o.Events)*int64(o.Fanout), MaxEvents)
	}
	if o.Batch < 1 || o.Batch > MaxBatch {
		bad("--batch must be from 1 to %d", MaxBatch)
	}
	if o.Connections < 1 || o.Connections > MaxConnections {
		bad("--connections must be from 1 to %d", MaxConnections)
	}
	if o.PayloadSize < MinPayloadSize || o.PayloadSize > MaxPayloadSize {
		bad("--payload-size must be from %d to %d bytes", MinPayloadSize, MaxPayloadSize)
	}
	if o.PayloadKind != PayloadPad && o.PayloadKind != PayloadOrder {
		bad("--payload must be %s or %s", PayloadPad, PayloadOrder)
	}
	if o.DrainTimeout < 0 || o.DrainTimeout > MaxDrainTimeout {
		bad("--drain-timeout must be at most %s", MaxDrainTimeout)
	}
	if o.ReceiverDelay < 0 || o.ReceiverDelay > MaxReceiverDelay {
		bad("--receiver-delay must be from 0 to %s, not %s", MaxReceiverDelay, o.ReceiverDelay)
	}
	if o.MaxInFlight < 0 || o.MaxInFlight > MaxMaxInFlight {
		bad("--max-in-flight must be from 1 to %d (0: Herald's default), not %d", MaxMaxInFlight, o.MaxInFlight)
	}
	if o.IdleEndpoints < 0 || o.IdleEndpoints > MaxIdleEndpoints {
		bad("--idle-endpoints must be from 0 to %d, not %d", MaxIdleEndpoints, o.IdleEndpoints)
	}
	if o.HangingEndpoints < 0 || o.HangingEndpoints > MaxEndpoints {
		bad("--hanging-endpoints must be from 0 to %d, not %d", MaxEndpoints, o.HangingEndpoints)
	}
	if o.HangingEndpoints == 0 && (o.HangingRate != 0 || o.HangingTimeout != 0) {
		bad("--hanging-rate and --hanging-timeout apply to --hanging-endpoints")
	}
	if o.HangingRate < 0 || o.HangingRate > MaxHangingRate {
		bad("--hanging-rate must be from 0 (one an endpoint every 10 s) to %d events/s, not %g", MaxHangingRate, o.HangingRate)
	}
	if o.HangingTimeout < 0 || o.HangingTimeout > MaxHangingTimeout {
		bad("--hanging-timeout must be from 0 (Herald's default) to %s, not %s", MaxHangingTimeout, o.HangingTimeout)
	}
	if o.HangingEndpoints > 0 && o.Events == 0 && o.Duration == 0 {
		bad("--hanging-endpoints needs a load (--events, --duration or --soak)")
	}
	if o.Idle < 0 || o.Idle > MaxIdle {
		bad("--idle must be from 0 (no idle measurement) to %s, not %s", MaxIdle, o.Idle)
	}
	if o.Soak < 0 || o.Soak > MaxDuration {
		bad("--soak must be from 0 (no soak) to %s, not %s", MaxDuration, o.Soak)
	}
	if o.Soak > 0 && (o.SoakEvery < MinSoakEvery || o.SoakEvery > o.Soak) {
		bad("--soak-every must be from %s to --soak (%s), not %s", MinSoakEvery, o.Soak, o.SoakEvery)
	}
	return errors.Join(errs...)
}

// CheckLoopback refuses a server address whose host is not 127.0.0.1,
// localhost or ::1: the bench puts load on this machine only.
func CheckLoopback(server string) error {
	u, err := client.ParseBaseURL(server)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	switch strings.ToLower(u.Hostname()) {
	case "127.0.0.1", "localhost", "::1":
		return nil
	}
	return fmt.Errorf("--server %s: the bench runs only against this machine (127.0.0.1, localhost or ::1), not %q", server, u.Hostname())
}
