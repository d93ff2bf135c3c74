package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func statsCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show deliveries by status and the depth of the queues, or the activity of the last hour or day",
		Long: `Show deliveries by status and the depth of the queues (GET /v1/stats).

With --series 1h or --series 24h, show instead the activity of the last hour
(a line a minute) or day (a line per 15 minutes), oldest first: attempts,
those answered 2xx and not, retries scheduled, deliveries gone dead,
attempts per second, success rate and attempt latency p50 and p95; and the
queue's depth, sampled once a minute: deliveries due, how long the oldest
due one had waited, and the dead-letter depth (the highest sample of each
15 minutes; "-" where no sample was taken)
(GET /v1/stats/series, operator keys only).`,
		Args: cobra.NoArgs,
	}
	r := remoteFlags(cmd.Flags(), stdio)
	series := cmd.Flags().String("series", "", "show the activity of the last 1h or 24h instead")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *series != "" && *series != "1h" && *series != "24h" {
			return fmt.Errorf("--series must be 1h or 24h, not %q", *series)
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			if *series != "" {
				return printSeries(ctx, r, c, *series)
			}
			s, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, s.Raw)
			}
			fmt.Fprintln(r.stdio.Out, "deliveries by status:")
			b := newBlock(r.stdio.Out)
			// The way a delivery goes, then any status a newer server adds.
			order := []string{"pending", "delivering", "delivered", "dead", "cancelled"}
			for _, st := range slices.Sorted(maps.Keys(s.Deliveries)) {
				if !slices.Contains(order, st) {
					order = append(order, st)
				}
			}
			for _, st := range order {
				b.line("  "+st, strconv.FormatInt(s.Deliveries[st], 10))
			}
			b.line("dead-letter depth", strconv.FormatInt(s.DeadLetterDepth, 10))
			b.line("due now", strconv.FormatInt(s.DueNow, 10))
			age := time.Duration(s.OldestDueAgeSeconds * float64(time.Second)).Round(time.Millisecond)
			b.line("oldest due waited", age.String())
			return b.flush()
		})
	}
	return cmd
}

// printSeries prints the activity and the queue's depth of the last
// window, a line a point.
func printSeries(ctx context.Context, r *remote, c *client.Client, window string) error {
	s, err := c.StatsSeries(ctx, window)
	if err != nil {
		return err
	}
	if r.json {
		return printRaw(r.stdio.Out, s.Raw)
	}
	t := newTable(r.stdio.Out)
	t.row("FROM", "ATTEMPTS", "2XX", "FAILED", "RETRIES", "DEAD", "PER SEC", "SUCCESS", "P50", "P95",
		"DUE NOW", "OLDEST DUE", "DEAD LETTERS")
	opt := func(v *float64, format string) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf(format, *v)
	}
	count := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	age := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return time.Duration(*v * float64(time.Second)).Round(time.Second).String()
	}
	for _, p := range s.Points {
		success := "-"
		if p.SuccessRate != nil {
			success = fmt.Sprintf("%.1f%%", *p.SuccessRate*100)
		}
		t.row(shortTime(p.At), strconv.FormatInt(p.Attempts, 10), strconv.FormatInt(p.Succeeded, 10),
			strconv.FormatInt(p.Failed, 10), strconv.FormatInt(p.Retries, 10), strconv.FormatInt(p.Exhausted, 10),
			strconv.FormatFloat(p.DeliveriesPerSecond, 'f', 2, 64), success,
			opt(p.LatencyP50MS, "%.1fms"), opt(p.LatencyP95MS, "%.1fms"),
			count(p.DueNow), age(p.OldestDueSeconds), count(p.Dead))
	}
	return t.flush()
}
