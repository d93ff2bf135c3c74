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
		Short: "Show deliveries by status and the depth of the queues",
		Args:  cobra.NoArgs,
	}
	r := remoteFlags(cmd.Flags(), stdio)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
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
