package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/client"
)

func eventsCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "Send events and look at what was sent",
		Args:    cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:    showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(eventSendCmd(r), eventListCmd(r), eventGetCmd(r), eventReplayCmd(r))
	return cmd
}

func eventSendCmd(r *remote) *cobra.Command {
	var consumer, eventType, payload, payloadFile, key string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "send --type TYPE --payload JSON [flags]",
		Short: "Send an event to every endpoint of its consumer that subscribes to its type",
		Example: "  herald events send --consumer cust_42 --type order.created --payload '{\"order_id\":\"o_1\"}'\n" +
			"  herald events send --type order.created --payload-file order.json --idempotency-key order-o_1-created\n" +
			"  echo '{\"order_id\":\"o_1\"}' | herald events send --type order.created --payload-file -",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&consumer, "consumer", "", "consumer (customer) id the event is for (default \"default\")")
	fs.StringVar(&eventType, "type", "", "event type, as order.created")
	fs.StringVar(&payload, "payload", "", "the payload: JSON, sent byte for byte")
	fs.StringVar(&payloadFile, "payload-file", "", "read the payload from this file; - reads standard input")
	fs.StringVar(&key, "idempotency-key", "", "a key that makes sending the same event again harmless")
	addQuiet(fs, &quiet)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if eventType == "" {
			return errors.New("--type is required: which event happened?")
		}
		body, err := readPayload(r.stdio.In, cmd.Flags().Changed("payload"), payload, payloadFile)
		if err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			res, err := c.EventSend(ctx, &client.EventParams{
				ConsumerID: consumer, EventType: eventType, Payload: body, IdempotencyKey: key,
			})
			if err != nil {
				return err
			}
			switch {
			case r.json:
				return printRaw(r.stdio.Out, res.Raw)
			case quiet:
				_, err := fmt.Fprintln(r.stdio.Out, res.ID)
				return err
			}
			w := r.stdio.Out
			if res.Duplicate {
				fmt.Fprintf(w, "duplicate: the idempotency key was used before; event %s stands, nothing new was sent\n", res.ID)
			} else {
				fmt.Fprintf(w, "accepted event %s: %s\n", res.ID, plural(len(res.Deliveries), "delivery", "deliveries"))
			}
			if len(res.Deliveries) == 0 {
				return nil
			}
			t := newTable(w)
			t.row("DELIVERY", "ENDPOINT")
			for _, d := range res.Deliveries {
				t.row(d.ID, d.EndpointID)
			}
			return t.flush()
		})
	}
	return cmd
}

// readPayload takes the payload from --payload or --payload-file (- for
// in), and checks it is JSON, naming the flag it came from.
func readPayload(in io.Reader, inline bool, payload, file string) ([]byte, error) {
	var body []byte
	var from string
	switch {
	case inline && file != "":
		return nil, errors.New("give --payload or --payload-file, not both")
	case inline:
		body, from = []byte(payload), "--payload"
	case file == "-":
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, fmt.Errorf("read the payload from standard input: %w", err)
		}
		body, from = b, "the payload on standard input"
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--payload-file: %w", err)
		}
		body, from = b, "--payload-file "+file
	default:
		return nil, errors.New("give the payload with --payload '{...}' or --payload-file FILE (- for standard input)")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, fmt.Errorf("%s is empty; the payload must be JSON", from)
	}
	if err := json.Unmarshal(body, new(json.RawMessage)); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %s", from, strings.TrimPrefix(err.Error(), "json: "))
	}
	return body, nil
}

func eventListCmd(r *remote) *cobra.Command {
	var consumer, eventType, since, until string
	cmd := &cobra.Command{
		Use:   "list [--consumer ID] [--type TYPE] [--since T] [--until T]",
		Short: "List events, newest first",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&consumer, "consumer", "", "only this consumer's events")
	fs.StringVar(&eventType, "type", "", "only events of this type")
	fs.StringVar(&since, "since", "", "only events created at or after this RFC 3339 time, or this long ago (1h)")
	fs.StringVar(&until, "until", "", "only events created before this RFC 3339 time, or this long ago")
	l := addListFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		now := time.Now()
		p := &client.EventListParams{ConsumerID: consumer, EventType: eventType, ListOptions: opts}
		if p.Since, err = parseWhen("since", since, now); err != nil {
			return err
		}
		if p.Until, err = parseWhen("until", until, now); err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.EventList(ctx, p)
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(ev *client.Event) string { return ev.ID }, eventTable)
		})
	}
	return cmd
}

func eventTable(t *tableWriter, evs []client.Event) {
	t.row("ID", "TYPE", "CONSUMER", "PAYLOAD", "CREATED")
	for i := range evs {
		ev := &evs[i]
		t.row(ev.ID, ev.EventType, ev.ConsumerID, plural(len(ev.Payload), "byte", "bytes"), shortTime(ev.CreatedAt))
	}
}

func eventGetCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show an event, its payload and its deliveries",
		Args:  oneID("event"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				ev, err := c.EventGet(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printRaw(r.stdio.Out, ev.Raw)
				}
				return printEvent(r.stdio.Out, ev)
			})
		},
	}
}

func printEvent(w io.Writer, ev *client.Event) error {
	b := newBlock(w)
	b.line("id", ev.ID)
	b.line("type", ev.EventType)
	b.line("consumer", ev.ConsumerID)
	b.line("idempotency key", ev.IdempotencyKey)
	b.line("created", longTime(ev.CreatedAt))
	if err := b.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "payload:")
	fmt.Fprintln(w, indentJSON(ev.Payload, "  "))
	if len(ev.Deliveries) == 0 {
		_, err := fmt.Fprintln(w, "deliveries: none (no endpoint subscribed)")
		return err
	}
	fmt.Fprintln(w, "deliveries:")
	ds := make([]client.Delivery, len(ev.Deliveries))
	for i, d := range ev.Deliveries {
		ds[i] = client.Delivery{Delivery: d}
	}
	t := newTable(w)
	deliveryTable(t, ds)
	return t.flush()
}

// indentJSON pretty-prints JSON with every line prefixed; what is not JSON
// is returned as it is.
func indentJSON(b []byte, prefix string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, prefix, "  "); err != nil {
		return prefix + strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return prefix + buf.String()
}

func eventReplayCmd(r *remote) *cobra.Command {
	var status string
	var o replayOptions
	cmd := &cobra.Command{
		Use:     "replay ID [--status dead] [--dry-run] [--rate N]",
		Short:   "Send an event's finished deliveries again (all terminal ones, or those of --status)",
		Example: "  herald events replay evt_… --status dead\n  herald events replay evt_… --dry-run\n  herald events replay evt_… --rate 5",
		Args:    oneID("event"),
	}
	cmd.Flags().StringVar(&status, "status", "", "only deliveries in this status: dead, delivered or cancelled (default: all three)")
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p := &client.EventReplayParams{Status: status}
		var err error
		if p.DryRun, p.Rate, err = o.values(cmd.Flags()); err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			out, err := c.EventReplay(ctx, args[0], p)
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, out.Raw)
			}
			_, err = fmt.Fprintln(r.stdio.Out, replayedLine(out, p.Rate, "event "+args[0]))
			return err
		})
	}
	return cmd
}
