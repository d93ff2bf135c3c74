package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/client"
)

// DefaultServer is where the client commands look for Herald when neither
// --server nor HERALD_SERVER says otherwise: serve's default address.
const DefaultServer = "http://127.0.0.1:8080"

// remote holds the flags every client command shares (endpoints, events,
// deliveries, stats, keys) and what they print to.
type remote struct {
	stdio  IO
	server string
	apiKey string
	json   bool
}

// remoteFlags declares --server, --api-key and --json on fs. --api-key has
// the twin HERALD_API_KEY, the variable serve reads too, so one export
// serves both.
func remoteFlags(fs *pflag.FlagSet, stdio IO) *remote {
	r := &remote{stdio: stdio}
	fs.StringVar(&r.server, "server", DefaultServer, "address of the Herald API")
	fs.StringVar(&r.apiKey, "api-key", "", "API key for /v1 calls (the one serve was given or printed)")
	fs.BoolVar(&r.json, "json", false, "print the API's JSON answer, indented, for scripts")
	return r
}

// client returns a client for --server and --api-key. Without a key it
// fails at once: every call would be refused.
func (r *remote) client() (*client.Client, error) {
	if r.apiKey == "" {
		return nil, errors.New("no API key: give it with --api-key or HERALD_API_KEY (the key `herald serve` was given, or printed on its first start)")
	}
	c, err := client.New(r.server, r.apiKey, client.Options{UserAgent: "herald-cli/" + app.Version})
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return c, nil
}

// explain turns a client error into what a person at a terminal needs to
// read: where the server was looked for and how to point elsewhere, which
// key setting to fix, or the API's own code and message.
func (r *remote) explain(err error) error {
	var unreachable *client.UnreachableError
	var apiErr *client.Error
	switch {
	case errors.As(err, &unreachable):
		return fmt.Errorf("%w\nIs `herald serve` running there? Point to it with --server or HERALD_SERVER.", unreachable)
	case errors.As(err, &apiErr) && apiErr.IsUnauthorized():
		return fmt.Errorf("unauthorized: the API key is missing or wrong (%s); give the right one with --api-key or HERALD_API_KEY", apiErr.Message)
	}
	return err
}

// run makes a client and calls f with it and the command's context,
// explaining any error.
func (r *remote) run(cmd *cobra.Command, f func(ctx context.Context, c *client.Client) error) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	return r.explain(f(cmd.Context(), c))
}

// listFlags are the paging flags of a list command, and its -q.
type listFlags struct {
	limit  int
	all    bool
	cursor string
	quiet  bool
}

func addListFlags(fs *pflag.FlagSet) *listFlags {
	l := &listFlags{}
	fs.IntVar(&l.limit, "limit", 0, "list at most this many, following pages (default: one page of 50)")
	fs.BoolVar(&l.all, "all", false, "list everything, following every page")
	fs.StringVar(&l.cursor, "cursor", "", "continue from the next_cursor of an earlier list")
	addQuiet(fs, &l.quiet)
	return l
}

func addQuiet(fs *pflag.FlagSet, quiet *bool) {
	fs.BoolVarP(quiet, "quiet", "q", false, "print only ids, one per line")
}

func (l *listFlags) options() (client.ListOptions, error) {
	if l.limit < 0 {
		return client.ListOptions{}, errors.New("--limit must be at least 1")
	}
	if l.all && l.limit > 0 {
		return client.ListOptions{}, errors.New("give --all or --limit, not both")
	}
	return client.ListOptions{Limit: l.limit, All: l.all, Cursor: l.cursor}, nil
}

// printPage prints a fetched list as JSON (--json), ids (-q), or as the
// table table writes, with a note on stderr when more remains.
func printPage[T any](r *remote, l *listFlags, p *client.Page[T], id func(*T) string, table func(*tableWriter, []T)) error {
	switch {
	case r.json:
		return printJSONValue(r.stdio.Out, p)
	case l.quiet:
		for i := range p.Data {
			fmt.Fprintln(r.stdio.Out, id(&p.Data[i]))
		}
		return nil
	}
	if len(p.Data) == 0 {
		fmt.Fprintln(r.stdio.Out, "(none)")
		return nil
	}
	tw := newTable(r.stdio.Out)
	table(tw, p.Data)
	if err := tw.flush(); err != nil {
		return err
	}
	if p.NextCursor != "" {
		fmt.Fprintf(r.stdio.Err, "more remain: add --all, --limit N, or --cursor %s\n", p.NextCursor)
	}
	return nil
}

// parseWhen reads a --since or --until value: an RFC 3339 time, or a
// duration meaning that long before now ("1h", "30m").
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s: %q is neither an RFC 3339 time (2024-05-01T12:00:00Z) nor a duration ago (1h)", flag, v)
}

// showHelp is what a command group does when called alone. Being
// runnable, a group refuses an unknown subcommand (a typo in a script
// fails) instead of printing its help and exiting 0.
func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// oneID checks the single id argument of a command.
func oneID(kind string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
			return fmt.Errorf("give one %s id", kind)
		}
		return nil
	}
}
