package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func keysCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Aliases: []string{"key", "api-keys"},
		Short:   "Make, list and revoke API keys: operator keys, or keys that reach one consumer",
		Args:    cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:    showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(keyCreateCmd(r), keyListCmd(r), keyRevokeCmd(r))
	return cmd
}

func keyCreateCmd(r *remote) *cobra.Command {
	var name, scope, consumer string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "create --name NAME --scope operator|consumer [--consumer ID]",
		Short: "Make an API key; it is shown only now",
		Long: "Make an API key with an operator key. --scope operator reaches everything; --scope consumer\n" +
			"reaches the endpoints, events and deliveries of --consumer alone. The key is printed only now:\n" +
			"Herald keeps its hash.",
		Example: "  herald keys create --name \"cust_42 integration\" --scope consumer --consumer cust_42\n" +
			"  KEY=$(herald keys create --name deploys --scope operator -q)",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&name, "name", "", "what the key is for")
	fs.StringVar(&scope, "scope", "", "operator (everything) or consumer (one consumer's data)")
	fs.StringVar(&consumer, "consumer", "", "the consumer a consumer key reaches")
	fs.BoolVarP(&quiet, "quiet", "q", false, "print only the key itself")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case name == "":
			return errors.New("--name is required: say what the key is for")
		case scope != "operator" && scope != "consumer":
			return errors.New("--scope must be operator (everything) or consumer (one consumer's data, with --consumer)")
		case scope == "consumer" && consumer == "":
			return errors.New("--consumer is required with --scope consumer: the consumer the key reaches")
		case scope == "operator" && consumer != "":
			return errors.New("--consumer is for --scope consumer only; an operator key reaches every consumer (is HERALD_CONSUMER set?)")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			p := &client.APIKeyParams{Name: &name, Scope: &scope}
			if consumer != "" {
				p.ConsumerID = &consumer
			}
			k, err := c.APIKeyCreate(ctx, p)
			if err != nil {
				return err
			}
			switch {
			case r.json:
				return printRaw(r.stdio.Out, k.Raw)
			case quiet:
				_, err := fmt.Fprintln(r.stdio.Out, k.Key)
				return err
			}
			if err := printAPIKey(r.stdio.Out, k); err != nil {
				return err
			}
			_, err = fmt.Fprintln(r.stdio.Err, "The key is shown only now; Herald keeps its hash. Use it as --api-key or HERALD_API_KEY.")
			return err
		})
	}
	return cmd
}

func printAPIKey(w io.Writer, k *client.APIKey) error {
	b := newBlock(w)
	b.line("id", k.ID)
	b.line("name", k.Name)
	b.line("scope", k.Scope)
	b.line("consumer", k.ConsumerID)
	b.line("prefix", k.Prefix)
	b.line("created", longTime(k.CreatedAt))
	b.line("last used", longTimePtr(k.LastUsedAt))
	if k.Key != "" {
		b.line("key", k.Key)
	}
	return b.flush()
}

func keyListCmd(r *remote) *cobra.Command {
	var p client.APIKeyListParams
	cmd := &cobra.Command{
		Use:     "list [--consumer ID]",
		Short:   "List API keys, newest first (never the keys themselves)",
		Example: "  herald keys list --consumer cust_42",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&p.ConsumerID, "consumer", "", "only the keys of this consumer")
	l := addListFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		p.ListOptions = opts
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.APIKeyList(ctx, &p)
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(k *client.APIKey) string { return k.ID }, keyTable)
		})
	}
	return cmd
}

func keyTable(t *tableWriter, ks []client.APIKey) {
	t.row("ID", "NAME", "SCOPE", "CONSUMER", "PREFIX", "LAST USED", "CREATED")
	for i := range ks {
		k := &ks[i]
		t.row(k.ID, truncate(k.Name, 40), k.Scope, k.ConsumerID, k.Prefix, shortTimePtr(k.LastUsedAt), shortTime(k.CreatedAt))
	}
}

func keyRevokeCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key: every node refuses it from the next call on",
		Args:  oneID("API key"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.APIKeyRevoke(ctx, args[0]); err != nil {
					return err
				}
				if r.json {
					// The API answers 204 with no body; say what happened.
					return printJSONValue(r.stdio.Out, map[string]any{"id": args[0], "revoked": true})
				}
				_, err := fmt.Fprintf(r.stdio.Out, "revoked API key %s\n", args[0])
				return err
			})
		},
	}
}
