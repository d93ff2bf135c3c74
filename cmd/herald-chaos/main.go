// Command herald-chaos runs Herald's fault harness (internal/chaos) and
// prints its verdict: `make chaos` builds bin/herald and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/heraldhooks/herald/internal/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("herald-chaos", flag.ContinueOnError)
	herald := fs.String("herald", "bin/herald", "the herald binary the nodes run")
	backends := fs.String("backends", "sqlite,postgres", "the backends to run on, comma-separated: sqlite, postgres")
	duration := fs.Duration("duration", time.Minute, "how long the load and the faults run, per backend")
	rate := fs.Float64("rate", 30, "events per second (each goes to every endpoint)")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule and the load (0: a new one, printed in the verdict)")
	drain := fs.Duration("drain", 3*time.Minute, "how long to wait, after the load, for every acknowledged delivery (longer while a breaker is open: until its probe)")
	pgBin := fs.String("pg-bin", "", "directory of PostgreSQL's initdb and pg_ctl (default: found)")
	replication := fs.String("replication", chaos.ReplicationSync, "PostgreSQL as a primary and a standby the failover nemesis promotes: sync (a synchronous standby: nothing acknowledged may be lost), async (an asynchronous one: the verdict reports what the failover lost), or none (one server, no failover)")
	standbyLag := fs.Duration("standby-lag", 0, "hold what the primary sends its standby this long, as a network between zones does (with --replication async, the failover then loses that much of the primary's last moments)")
	asJSON := fs.Bool("json", false, "print the verdicts as JSON instead of a table")
	quiet := fs.Bool("quiet", false, "print no progress lines on stderr")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	var list []string
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			list = append(list, b)
		}
	}
	if _, err := os.Stat(*herald); err != nil {
		fmt.Fprintf(os.Stderr, "herald-chaos: the herald binary %s is not there (make build makes bin/herald): %v\n", *herald, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := chaos.Config{Herald: *herald, PGBin: *pgBin, Replication: *replication, StandbyLag: *standbyLag, Duration: *duration, Rate: *rate, Seed: *seed, Drain: *drain}
	if !*quiet {
		cfg.Log = os.Stderr
	}
	vs, err := chaos.RunAll(ctx, cfg, list)
	if *asJSON {
		out, jerr := chaos.MarshalVerdicts(vs)
		if jerr != nil {
			fmt.Fprintln(os.Stderr, "herald-chaos:", jerr)
			return 2
		}
		fmt.Println(string(out))
	} else if len(vs) > 0 {
		if werr := chaos.WriteTable(os.Stdout, vs); werr != nil {
			fmt.Fprintln(os.Stderr, "herald-chaos:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "herald-chaos:", err)
		return 2
	}
	for _, v := range vs {
		if !v.Pass {
			return 1
		}
	}
	return 0
}
