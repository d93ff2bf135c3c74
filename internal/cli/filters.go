package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

// endpointFilterTestCmd is `herald endpoints test-filter ID [--filter EXPR]`:
// what a filter (the endpoint's own, or the one given) makes of the
// consumer's last 100 events, as a table, newest first.
func endpointFilterTestCmd(r *remote) *cobra.Command {
	var filter string
	cmd := &cobra.Command{
		Use:   "test-filter ID [--filter EXPR]",
		Short: "Try a filter (the endpoint's own, or --filter) on the consumer's last 100 events; writes nothing",
		Example: "  herald endpoints test-filter ep_…\n" +
			"  herald endpoints test-filter ep_… --filter \"payload.amount > 1000 && payload.currency == 'EUR'\"",
		Args: oneID("endpoint"),
	}
	cmd.Flags().StringVar(&filter, "filter", "", "the filter to try instead of the endpoint's own")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var f *string
		if cmd.Flags().Changed("filter") {
			f = &filter
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			res, err := c.EndpointFilterTest(ctx, args[0], f)
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, res.Raw)
			}
			t := newTable(r.stdio.Out)
			t.row("EVENT", "TYPE", "PASS", "ERROR")
			passed := 0
			for _, d := range res.Data {
				msg := ""
				if d.Error != nil {
					msg = *d.Error
				}
				if d.Pass {
					passed++
				}
				t.row(d.EventID, d.EventType, yesNo(d.Pass), msg)
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(r.stdio.Out, "%d of %d events pass\n", passed, len(res.Data))
			return err
		})
	}
	return cmd
}
