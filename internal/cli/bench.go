package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldhooks/herald/internal/bench"
)

func benchCmd(stdio IO) *cobra.Command {
	var (
		o          bench.Options
		spawn      bool
		asJSON     bool
		quiet      bool
		shape      bool
		shapeEps   []int
		shapeDelay []time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench [flags] [-- serve flags]",
		Short: "Measure a Herald on this machine: events/s, deliveries/s, latency, CPU and memory",
		Long: "Put a load on a Herald and measure it. By default the bench starts its own\n" +
			"`herald serve` (this binary) on a free 127.0.0.1 port with a fresh SQLite file,\n" +
			"so it can also read that process's CPU time and peak memory; flags after --\n" +
			"go to that serve (-- --concurrency 128), which gets none of the HERALD_*\n" +
			"variables, so it runs as the command line says. With --server it measures a Herald\n" +
			"already running on this machine (127.0.0.1, localhost or ::1 only), which must\n" +
			"allow deliveries to loopback (--allow-private-networks).\n\n" +
			"The bench runs its own receiver on 127.0.0.1, creates --endpoints endpoints that\n" +
			"deliver to it, sends the events over --connections connections, waits for the\n" +
			"deliveries (at most --drain-timeout), and reports: events accepted/s, deliveries/s,\n" +
			"latency from the ingest answer to the arrival (p50, p90, p99, max), each ingest\n" +
			"call's round trip (p50, p99; in --json also p90, max), attempts/s,\n" +
			"the spawned Herald's CPU seconds and peak RSS, and deliveries missing or duplicated.\n\n" +
			"--idle-endpoints N first creates N endpoints that never get work (consumers\n" +
			"idle_000001 ..., 32 calls at once) and reports how long that took. --idle D then\n" +
			"holds the node without load for D and reports the CPU it used, in % of one core\n" +
			"(Herald's, and on PostgreSQL its database backends'); with --idle and none of\n" +
			"--events, --duration or --soak, nothing is sent. --soak D sends for D (as --duration\n" +
			"does; give one of them) and prints a row a minute (--soak-every): deliveries that\n" +
			"arrived in it, their p50 and p99, and the rows and dead rows of the hot tables of\n" +
			"the spawned Herald's database; at the end, the last row's p99 over the first's.\n\n" +
			"The bench shares the machine with what it measures: run it on a quiet machine.\n" +
			"Its flags have the twins HERALD_BENCH_<FLAG> (HERALD_BENCH_EVENTS, ...), so that\n" +
			"HERALD_DB, HERALD_SERVER and HERALD_API_KEY, set for serve and the client\n" +
			"commands, never turn the bench onto real data.",
		Example: "  herald bench --events 100000 --endpoints 100\n" +
			"  herald bench --duration 1m --rate 2000 --batch 100 --json\n" +
			"  herald bench --events 50000 --fanout 10 --consumers 1 -- --concurrency 256\n" +
			"  herald bench --idle-endpoints 100000 --idle 1m --soak 15m --rate 1000\n" +
			"  herald bench --shape --duration 1m --rate 1000 --max-in-flight 300 -- --concurrency 2000\n" +
			"  herald bench --server http://127.0.0.1:8080 --api-key \"$HERALD_API_KEY\"",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unexpected argument %q: serve flags go after --", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ServeArgs = args
			if cmd.Flags().Changed("spawn") && spawn && o.Server != "" {
				return errors.New("give --spawn or --server, not both")
			}
			if !spawn && o.Server == "" {
				return errors.New("--spawn=false needs --server: the bench measures a Herald it starts, or one already running")
			}
			if !quiet {
				o.Progress = stdio.Err
			}
			if shape {
				// The shapes set these; given, they are refused.
				if !cmd.Flags().Changed("endpoints") {
					o.Endpoints = 0
				}
				if !cmd.Flags().Changed("fanout") {
					o.Fanout = 0
				}
				rep, err := bench.RunShapes(cmd.Context(), o, shapeEps, shapeDelay)
				if rep == nil {
					return err
				}
				return errors.Join(err, printBenchReport(stdio, asJSON, rep))
			}
			if cmd.Flags().Changed("shape-endpoints") || cmd.Flags().Changed("shape-delays") {
				return errors.New("--shape-endpoints and --shape-delays apply to --shape")
			}
			rep, err := bench.Run(cmd.Context(), o)
			if rep == nil {
				return err
			}
			return errors.Join(err, printBenchReport(stdio, asJSON, rep))
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&spawn, "spawn", true, "start a herald serve (this binary) to measure; the default unless --server is given")
	fs.StringVar(&o.Server, "server", "", "measure the Herald running at this address instead (127.0.0.1, localhost or ::1 only)")
	fs.StringVar(&o.APIKey, "api-key", "", "API key of the --server Herald")
	fs.StringVar(&o.Binary, "herald-binary", "", "herald binary to spawn (default: this one)")
	fs.StringVar(&o.DB, "db", "", "database of the spawned Herald: sqlite://path or postgres://... (default: a fresh SQLite file in a temporary directory, removed afterwards); on PostgreSQL the spawned serve gets a throwaway --encryption-key unless one follows --")
	fs.IntVar(&o.Endpoints, "endpoints", bench.DefaultEndpoints, "endpoints to create")
	fs.IntVar(&o.Consumers, "consumers", 0, "consumers owning the endpoints, from 1 to endpoints/fanout (default: one per group of --fanout endpoints)")
	fs.IntVar(&o.Fanout, "fanout", 1, "endpoints each event is delivered to")
	fs.IntVar(&o.Events, "events", 0, fmt.Sprintf("events to send, at most %d (default %d unless --duration is given)", bench.MaxEvents, bench.DefaultEvents))
	fs.DurationVar(&o.Duration, "duration", 0, fmt.Sprintf("send for this long instead of a number of events, at most %s", bench.MaxDuration))
	fs.Float64Var(&o.Rate, "rate", 0, "events a second; 0 sends as fast as Herald accepts them")
	fs.IntVar(&o.Batch, "batch", 1, fmt.Sprintf("events per ingest call: 1 uses POST /v1/events, up to %d POST /v1/events/batch", bench.MaxBatch))
	fs.IntVar(&o.Connections, "connections", bench.DefaultConnections, "ingest calls in flight at once")
	fs.IntVar(&o.PayloadSize, "payload-size", bench.DefaultPayloadSize, "bytes of each event's payload, a JSON object padded to size")
	fs.StringVar(&o.PayloadKind, "payload", bench.PayloadPad, "what each payload holds: pad ({\"pad\":\"xxx…\"}, which compresses to nothing) or order (a shop's order with line items and a note, which compresses as such JSON does: see serve's --compress-payloads)")
	fs.DurationVar(&o.ReceiverDelay, "receiver-delay", 0, fmt.Sprintf("how long the receiver takes to answer each delivery, a slow receiver (arrival is when it comes); at most %s", bench.MaxReceiverDelay))
	fs.IntVar(&o.MaxInFlight, "max-in-flight", 0, fmt.Sprintf("each endpoint's max_in_flight, from 1 to %d (default: Herald's)", bench.MaxMaxInFlight))
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", bench.DefaultDrainTimeout, "how long to wait for the deliveries after sending stops")
	fs.BoolVar(&o.Verify, "verify", false, "check each delivery's signature and body at the receiver (costs the bench CPU time)")
	fs.IntVar(&o.IdleEndpoints, "idle-endpoints", 0, fmt.Sprintf("idle endpoints to create before the load, each of its own consumer, which never get an event (at most %d)", bench.MaxIdleEndpoints))
	fs.IntVar(&o.HangingEndpoints, "hanging-endpoints", 0, fmt.Sprintf("endpoints to create beside the load whose receivers never answer (Herald gives up at their timeout), each of its own consumer; left out of the figures (at most %d)", bench.MaxEndpoints))
	fs.Float64Var(&o.HangingRate, "hanging-rate", 0, "events a second sent to the hanging endpoints in turn (default: one an endpoint every 10 s)")
	fs.DurationVar(&o.HangingTimeout, "hanging-timeout", 0, fmt.Sprintf("the hanging endpoints' timeout, at most %s (default: Herald's)", bench.MaxHangingTimeout))
	fs.DurationVar(&o.Idle, "idle", 0, "before the load, hold the node idle this long and report its CPU in % of one core (alone: no load at all)")
	fs.DurationVar(&o.Soak, "soak", 0, fmt.Sprintf("send for this long (in place of --duration) and print a row a minute: latency, deliveries, hot tables' rows and dead rows (at most %s)", bench.MaxDuration))
	fs.DurationVar(&o.SoakEvery, "soak-every", 0, "length of a --soak row (default 1m)")
	fs.BoolVar(&shape, "shape", false, "run the same load once for each of --shape-endpoints endpoints with each of --shape-delays receivers, and print a row each")
	fs.IntSliceVar(&shapeEps, "shape-endpoints", bench.DefaultShapeEndpoints, "with --shape: the numbers of endpoints the load is spread over")
	fs.DurationSliceVar(&shapeDelay, "shape-delays", bench.DefaultShapeDelays, "with --shape: the receivers' answer times (0: at once)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON, for scripts")
	fs.BoolVarP(&quiet, "quiet", "q", false, "print no progress lines on stderr")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "json" && f.Name != "help" {
			_ = fs.SetAnnotation(f.Name, envAnnotation, []string{"HERALD_BENCH_" + EnvName(f.Name)[len("HERALD_"):]})
		}
	})
	return cmd
}

// printBenchReport prints a bench's report, as JSON or as text.
func printBenchReport(stdio IO, asJSON bool, rep interface{ WriteText(io.Writer) error }) error {
	if asJSON {
		return printJSONValue(stdio.Out, rep)
	}
	return rep.WriteText(stdio.Out)
}
