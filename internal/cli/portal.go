package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func portalCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "portal",
		Short: "Make one-time links to the consumer portal, and end a consumer's portal sessions",
		Args:  cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:  showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(portalLinkCmd(r), portalRevokeCmd(r))
	return cmd
}

func portalLinkCmd(r *remote) *cobra.Command {
	var (
		consumer string
		ttl      time.Duration
		quiet    bool
	)
	cmd := &cobra.Command{
		Use:   "link --consumer ID [--ttl 15m]",
		Short: "Make a one-time link that signs a customer in to the portal as their consumer",
		Long: "Make a one-time link to the portal (/portal/) for --consumer, with an operator key. The link\n" +
			"opens once, within --ttl (1m to 24h), and starts a 12-hour browser session that reaches that\n" +
			"consumer's data alone. Its address is built from the --server address.",
		Example: "  herald portal link --consumer cust_42\n  URL=$(herald portal link --consumer cust_42 --ttl 1h -q)",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&consumer, "consumer", "", "the consumer the portal shows")
	fs.DurationVar(&ttl, "ttl", 0, "how long the link opens (1m to 24h; default 15m)")
	fs.BoolVarP(&quiet, "quiet", "q", false, "print only the link")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if consumer == "" {
			return errors.New("--consumer is required: the consumer the portal shows")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			l, err := c.PortalSessionCreate(ctx, consumer, ttl)
			if err != nil {
				return err
			}
			switch {
			case r.json:
				return printRaw(r.stdio.Out, l.Raw)
			case quiet:
				_, err := fmt.Fprintln(r.stdio.Out, l.URL)
				return err
			}
			b := newBlock(r.stdio.Out)
			b.line("url", l.URL)
			b.line("expires", longTime(l.ExpiresAt))
			return b.flush()
		})
	}
	return cmd
}

func portalRevokeCmd(r *remote) *cobra.Command {
	var consumer string
	cmd := &cobra.Command{
		Use:     "revoke --consumer ID",
		Short:   "End every portal link and session of a consumer, at once, on every node",
		Example: "  herald portal revoke --consumer cust_42",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().StringVar(&consumer, "consumer", "", "the consumer whose links and sessions end")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if consumer == "" {
			return errors.New("--consumer is required: the consumer whose portal links and sessions end")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			n, err := c.PortalSessionRevoke(ctx, consumer)
			if err != nil {
				return err
			}
			if r.json {
				return printJSONValue(r.stdio.Out, map[string]any{"consumer_id": consumer, "revoked": n})
			}
			_, err = fmt.Fprintf(r.stdio.Out, "ended %d portal links and sessions of %s\n", n, consumer)
			return err
		})
	}
	return cmd
}
