package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func consumersCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consumers",
		Short: "Settings of a consumer: where its notices are mailed",
		Args:  cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:  showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	address := &cobra.Command{
		Use:   "notifications",
		Short: "Read or set the address a consumer's notices are mailed to (with --smtp-url)",
		Long: "Herald mails a consumer's notice address when one of its endpoints is failing or\n" +
			"disabled, or a delivery to it went dead: at most one mail per endpoint per hour, and only\n" +
			"when the server runs with --smtp-url. A new address is pending: Herald mails it a link\n" +
			"(valid 48 hours) and mails it notices only once the link was opened and confirmed, or its\n" +
			"token given to `confirm`. Setting the pending address again resends the link (at most once\n" +
			"every 5 minutes). An operator key may vouch for an address with --confirmed. A consumer key\n" +
			"reaches its own consumer only.",
		Args: cobra.NoArgs,
		RunE: showHelp,
	}
	address.AddCommand(noticeAddressGetCmd(r), noticeAddressSetCmd(r), noticeAddressConfirmCmd(r))
	cmd.AddCommand(address)
	return cmd
}

func noticeAddressGetCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "get CONSUMER",
		Short:   "Show a consumer's notice address",
		Example: "  herald consumers notifications get cust_42",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				n, err := c.NoticeAddressGet(ctx, args[0])
				if err != nil {
					return err
				}
				return printNoticeAddress(r, n)
			})
		},
	}
}

func noticeAddressSetCmd(r *remote) *cobra.Command {
	var email string
	var confirmed bool
	cmd := &cobra.Command{
		Use:   "set CONSUMER --email ADDRESS [--confirmed]",
		Short: "Set a consumer's notice address (--email \"\" clears it); a new one is mailed a confirmation link",
		Example: "  herald consumers notifications set cust_42 --email ops@example.com\n" +
			"  herald consumers notifications set cust_42 --email ops@example.com --confirmed   # operator keys: no confirmation mail\n" +
			"  herald consumers notifications set cust_42 --email \"\"",
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&email, "email", "", "the address notices go to, as ops@example.com; \"\" clears it")
	cmd.Flags().BoolVar(&confirmed, "confirmed", false, "set the address confirmed at once, without a confirmation mail (operator keys only)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("email") {
			return errors.New("--email is required: an address, or \"\" to clear it")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			n, err := c.NoticeAddressSet(ctx, args[0], email, confirmed)
			if err != nil {
				return err
			}
			return printNoticeAddress(r, n)
		})
	}
	return cmd
}

func noticeAddressConfirmCmd(r *remote) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:     "confirm CONSUMER --token TOKEN",
		Short:   "Confirm a consumer's pending address with the token of the link mailed to it",
		Example: "  herald consumers notifications confirm cust_42 --token Qm9vbXNfdGhl…",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&token, "token", "", "the token of the confirmation link (its token= value)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if token == "" {
			return errors.New("--token is required: the token of the confirmation link mailed to the address")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			n, err := c.NoticeAddressConfirm(ctx, args[0], token)
			if err != nil {
				return err
			}
			return printNoticeAddress(r, n)
		})
	}
	return cmd
}

func printNoticeAddress(r *remote, n *client.NoticeAddress) error {
	if r.json {
		return printRaw(r.stdio.Out, n.Raw)
	}
	b := newBlock(r.stdio.Out)
	b.line("consumer", n.ConsumerID)
	email, updated, status := "(none: no mail)", "never", ""
	if n.Email != nil {
		email = *n.Email
	}
	if n.UpdatedAt != nil {
		updated = longTime(*n.UpdatedAt)
	}
	if n.Status != nil {
		status = *n.Status
	}
	b.line("email", email)
	b.line("status", status)
	b.line("confirmed", longTimePtr(n.ConfirmedAt))
	b.line("link mailed", longTimePtr(n.ConfirmationSentAt))
	b.line("link expires", longTimePtr(n.ConfirmationExpiresAt))
	b.line("updated", updated)
	mail := "yes"
	if !n.MailEnabled {
		mail = "no (the server has no --smtp-url)"
	}
	b.line("mail", mail)
	b.line("detail", n.Detail)
	return b.flush()
}
