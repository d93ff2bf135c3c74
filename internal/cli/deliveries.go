package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func deliveriesCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deliveries",
		Aliases: []string{"delivery", "dlv"},
		Short:   "Follow, replay and cancel deliveries (one event to one endpoint)",
		Args:    cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:    showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(deliveryListCmd(r), deliveryGetCmd(r), deliveryAttemptsCmd(r),
		deliveryActionCmd(r, "replay"), deliveryActionCmd(r, "cancel"))
	return cmd
}

func deliveryListCmd(r *remote) *cobra.Command {
	var p client.DeliveryListParams
	cmd := &cobra.Command{
		Use:     "list [--status S] [--endpoint ID] [--consumer ID] [--event ID]",
		Short:   "List deliveries, newest first",
		Example: "  herald deliveries list --status dead\n  DLV=$(herald deliveries list --status dead -q | head -1)",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&p.Status, "status", "", "only this status: pending, delivering, delivered, dead or cancelled")
	fs.StringVar(&p.EndpointID, "endpoint", "", "only deliveries to this endpoint")
	fs.StringVar(&p.ConsumerID, "consumer", "", "only this consumer's deliveries")
	fs.StringVar(&p.EventID, "event", "", "only deliveries of this event")
	l := addListFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		p.ListOptions = opts
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.DeliveryList(ctx, &p)
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(d *client.Delivery) string { return d.ID }, deliveryTable)
		})
	}
	return cmd
}

func deliveryTable(t *tableWriter, ds []client.Delivery) {
	t.row("ID", "STATUS", "TYPE", "ENDPOINT", "ATTEMPTS", "LAST", "NEXT ATTEMPT", "CREATED")
	for i := range ds {
		d := &ds[i]
		t.row(d.ID, deliveryStatus(d), d.EventType, d.EndpointID, strconv.Itoa(d.AttemptCount),
			truncate(lastResult(d), 40), shortTimePtr(d.NextAttemptAt), shortTime(d.CreatedAt))
	}
}

// deliveryStatus is the status, with the reason of a dead one.
func deliveryStatus(d *client.Delivery) string {
	if d.Status == "dead" && d.DeadReason != "" {
		return "dead (" + d.DeadReason + ")"
	}
	return d.Status
}

// lastResult sums up the last attempt: the status code that came back
// ("500 Internal Server Error"), or else the error (a timeout, a refused
// connection).
func lastResult(d *client.Delivery) string {
	if d.LastStatusCode != 0 {
		return strings.TrimSpace(strconv.Itoa(d.LastStatusCode) + " " + http.StatusText(d.LastStatusCode))
	}
	return d.LastError
}

func deliveryGetCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a delivery",
		Args:  oneID("delivery"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := c.DeliveryGet(ctx, args[0])
				if err != nil {
					return err
				}
				return r.printDelivery(d)
			})
		},
	}
}

func (r *remote) printDelivery(d *client.Delivery) error {
	if r.json {
		return printRaw(r.stdio.Out, d.Raw)
	}
	return printDelivery(r.stdio.Out, d)
}

func printDelivery(w io.Writer, d *client.Delivery) error {
	b := newBlock(w)
	b.line("id", d.ID)
	b.line("status", deliveryStatus(d))
	b.line("event", d.EventID)
	b.line("type", d.EventType)
	b.line("endpoint", d.EndpointID)
	b.line("consumer", d.ConsumerID)
	b.line("attempts", strconv.Itoa(d.AttemptCount))
	if d.LastStatusCode != 0 {
		b.line("last status code", strconv.Itoa(d.LastStatusCode))
	} else {
		b.line("last status code", "")
	}
	b.line("last error", d.LastError)
	b.line("next attempt", longTimePtr(d.NextAttemptAt))
	b.line("created", longTime(d.CreatedAt))
	b.line("updated", longTime(d.UpdatedAt))
	b.line("delivered", longTimePtr(d.DeliveredAt))
	return b.flush()
}

func deliveryAttemptsCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attempts ID",
		Short: "List a delivery's attempts, oldest first: when, how long, the answer",
		Args:  oneID("delivery"),
	}
	l := addListFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.DeliveryAttempts(ctx, args[0], opts)
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(a *client.Attempt) string { return a.ID }, attemptTable)
		})
	}
	return cmd
}

func attemptTable(t *tableWriter, as []client.Attempt) {
	t.row("#", "ID", "ATTEMPTED", "DURATION", "STATUS", "ERROR", "RESPONSE")
	for i := range as {
		a := &as[i]
		code := ""
		if a.StatusCode != 0 {
			code = strconv.Itoa(a.StatusCode)
		}
		t.row(strconv.Itoa(a.Number), a.ID, shortTime(a.AttemptedAt), fmt.Sprintf("%dms", a.DurationMS), code,
			truncate(a.Error, 40), truncate(strings.TrimSpace(a.ResponseBody), 40))
	}
}

// deliveryActionCmd is replay or cancel.
func deliveryActionCmd(r *remote, action string) *cobra.Command {
	cmd := &cobra.Command{
		Use:  action + " ID",
		Args: oneID("delivery"),
	}
	if action == "replay" {
		cmd.Short = "Send a finished delivery again, with a fresh attempt budget and the same webhook id"
	} else {
		cmd.Short = "Cancel a pending delivery"
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			var d *client.Delivery
			var err error
			if action == "replay" {
				d, err = c.DeliveryReplay(ctx, args[0])
			} else {
				d, err = c.DeliveryCancel(ctx, args[0])
			}
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, d.Raw)
			}
			if action == "replay" {
				_, err = fmt.Fprintf(r.stdio.Out, "replayed delivery %s: %s again, with a fresh attempt budget\n", d.ID, d.Status)
			} else {
				_, err = fmt.Fprintf(r.stdio.Out, "cancelled delivery %s\n", d.ID)
			}
			return err
		})
	}
	return cmd
}
