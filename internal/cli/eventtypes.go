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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldhooks/herald/internal/client"
)

func eventTypesCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "event-types",
		Aliases: []string{"event-type", "types"},
		Short:   "The event type catalog: what each type means, an example, and a JSON Schema ingest enforces",
		Args:    cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:    showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(eventTypeCreateCmd(r), eventTypeListCmd(r), eventTypeGetCmd(r), eventTypeUpdateCmd(r), eventTypeDeleteCmd(r))
	return cmd
}

// jsonFlags are a JSON value's two flags: --NAME inline, --NAME-file from
// a file (- for standard input).
type jsonFlags struct {
	name         string
	inline, file string
}

func addJSONFlags(fs *pflag.FlagSet, name, what string) *jsonFlags {
	j := &jsonFlags{name: name}
	fs.StringVar(&j.inline, name, "", what+", as JSON")
	fs.StringVar(&j.file, name+"-file", "", "read the "+name+" from this JSON file; - reads standard input")
	return j
}

// read returns the value given, nil when neither flag was.
func (j *jsonFlags) read(cmd *cobra.Command, in io.Reader) (json.RawMessage, error) {
	inline := cmd.Flags().Changed(j.name)
	if !inline && j.file == "" {
		return nil, nil
	}
	if inline && j.file != "" {
		return nil, fmt.Errorf("give --%s or --%s-file, not both", j.name, j.name)
	}
	body, from := []byte(j.inline), "--"+j.name
	if !inline {
		var err error
		if body, from, err = readFileArg(in, "--"+j.name+"-file", j.file); err != nil {
			return nil, err
		}
	}
	return checkJSON(body, from)
}

// readFileArg reads file, or standard input for -.
func readFileArg(in io.Reader, flag, file string) ([]byte, string, error) {
	if file == "-" {
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, "", fmt.Errorf("%s: read standard input: %w", flag, err)
		}
		return b, flag + " on standard input", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	return b, flag + " " + file, nil
}

// checkJSON checks body is one JSON value, naming where it came from.
func checkJSON(body []byte, from string) (json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, fmt.Errorf("%s is empty; it must be JSON", from)
	}
	if err := json.Unmarshal(body, new(json.RawMessage)); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %s", from, strings.TrimPrefix(err.Error(), "json: "))
	}
	return body, nil
}

func eventTypeCreateCmd(r *remote) *cobra.Command {
	var name, description, file string
	var quiet bool
	cmd := &cobra.Command{
		Use: "create (--name TYPE [--description TEXT] [--schema JSON | --schema-file FILE]\n" +
			"        [--example JSON | --example-file FILE] | --file ENTRY.json)",
		Short: "Add an event type to the catalog; with a schema, ingest holds its payloads to it",
		Long: "Add an event type to the catalog (operator keys only). The schema is a JSON Schema, draft\n" +
			"2020-12, whose $refs point inside itself; the example must match it. From then on an event of\n" +
			"this type whose payload breaks the schema is refused (400 invalid_payload). --file reads the\n" +
			"whole entry as POST /v1/event-types takes it; flags given beside it replace its fields.",
		Example: "  herald event-types create --name order.created --description \"An order was placed.\" \\\n" +
			"    --schema '{\"type\":\"object\",\"required\":[\"order_id\"]}' --example '{\"order_id\":\"o_1\"}'\n" +
			"  herald event-types create --file order.created.json",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&name, "name", "", "the event type, such as order.created")
	fs.StringVar(&description, "description", "", "what the event means, for those who subscribe to it")
	schema := addJSONFlags(fs, "schema", "a JSON Schema (draft 2020-12) every payload of the type must match")
	example := addJSONFlags(fs, "example", "an example payload")
	fs.StringVar(&file, "file", "", "read the entry ({\"name\", \"description\", \"schema\", \"example\"}) from this JSON file; - reads standard input")
	addQuiet(fs, &quiet)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var p client.EventTypeParams
		if file != "" {
			body, from, err := readFileArg(r.stdio.In, "--file", file)
			if err != nil {
				return err
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				return fmt.Errorf("%s is not an event type entry: %s", from, strings.TrimPrefix(err.Error(), "json: "))
			}
		}
		if cmd.Flags().Changed("name") {
			p.Name = &name
		}
		if cmd.Flags().Changed("description") {
			p.Description = &description
		}
		for _, f := range []struct {
			j   *jsonFlags
			dst *json.RawMessage
		}{{schema, &p.Schema}, {example, &p.Example}} {
			v, err := f.j.read(cmd, r.stdio.In)
			if err != nil {
				return err
			}
			if v != nil {
				*f.dst = v
			}
		}
		if p.Name == nil {
			return errors.New("--name is required (or a \"name\" in --file): the event type, such as order.created")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			e, err := c.EventTypeCreate(ctx, &p)
			if err != nil {
				return err
			}
			switch {
			case r.json:
				return printRaw(r.stdio.Out, e.Raw)
			case quiet:
				_, err := fmt.Fprintln(r.stdio.Out, e.Name)
				return err
			}
			return printEventType(r.stdio.Out, e)
		})
	}
	return cmd
}

func printEventType(w io.Writer, e *client.EventType) error {
	b := newBlock(w)
	b.line("name", e.Name)
	b.line("description", e.Description)
	b.line("built in", yesNo(e.BuiltIn))
	if !e.BuiltIn {
		b.line("created", longTimePtr(e.CreatedAt))
		b.line("updated", longTimePtr(e.UpdatedAt))
	}
	if err := b.flush(); err != nil {
		return err
	}
	for _, v := range []struct {
		label string
		raw   json.RawMessage
	}{{"schema", e.Schema}, {"example", e.Example}} {
		if len(v.raw) == 0 || string(v.raw) == "null" {
			fmt.Fprintf(w, "%s: none\n", v.label)
			continue
		}
		fmt.Fprintf(w, "%s:\n%s\n", v.label, indentJSON(v.raw, "  "))
	}
	return nil
}

func eventTypeListCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the catalog in name order, Herald's own herald.* types among yours",
		Args:  cobra.NoArgs,
	}
	l := addListFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.EventTypeList(ctx, opts)
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(e *client.EventType) string { return e.Name }, eventTypeTable)
		})
	}
	return cmd
}

func eventTypeTable(t *tableWriter, es []client.EventType) {
	t.row("NAME", "SCHEMA", "BUILT IN", "DESCRIPTION")
	for i := range es {
		e := &es[i]
		hasSchema := len(e.Schema) > 0 && string(e.Schema) != "null"
		t.row(e.Name, yesNo(hasSchema), yesNo(e.BuiltIn), truncate(e.Description, 60))
	}
}

func eventTypeGetCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "get TYPE",
		Short: "Show an event type of the catalog, its schema and example",
		Args:  oneID("event type"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				e, err := c.EventTypeGet(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printRaw(r.stdio.Out, e.Raw)
				}
				return printEventType(r.stdio.Out, e)
			})
		},
	}
}

func eventTypeUpdateCmd(r *remote) *cobra.Command {
	var description string
	var noSchema, noExample bool
	cmd := &cobra.Command{
		Use: "update TYPE [--description TEXT] [--schema JSON | --schema-file FILE | --no-schema]\n" +
			"        [--example JSON | --example-file FILE | --no-example]",
		Short: "Change an event type of the catalog; only the flags given change",
		Example: "  herald event-types update order.created --schema-file order.schema.json\n" +
			"  herald event-types update order.created --no-schema",
		Args: oneID("event type"),
	}
	fs := cmd.Flags()
	fs.StringVar(&description, "description", "", "what the event means")
	schema := addJSONFlags(fs, "schema", "a new JSON Schema (draft 2020-12)")
	example := addJSONFlags(fs, "example", "a new example payload")
	fs.BoolVar(&noSchema, "no-schema", false, "remove the schema: payloads of the type are accepted unchecked")
	fs.BoolVar(&noExample, "no-example", false, "remove the example")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var p client.EventTypeUpdateParams
		if cmd.Flags().Changed("description") {
			p.Description = &description
		}
		for _, f := range []struct {
			j    *jsonFlags
			none bool
			dst  *json.RawMessage
		}{{schema, noSchema, &p.Schema}, {example, noExample, &p.Example}} {
			v, err := f.j.read(cmd, r.stdio.In)
			if err != nil {
				return err
			}
			if v != nil && f.none {
				return fmt.Errorf("give --%s or --no-%s, not both", f.j.name, f.j.name)
			}
			if f.none {
				v = json.RawMessage("null")
			}
			*f.dst = v
		}
		if p.Description == nil && p.Schema == nil && p.Example == nil {
			return errors.New("nothing to change: give --description, --schema, --example or their --no- forms")
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			e, err := c.EventTypeUpdate(ctx, args[0], &p)
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, e.Raw)
			}
			return printEventType(r.stdio.Out, e)
		})
	}
	return cmd
}

func eventTypeDeleteCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "delete TYPE",
		Short: "Remove an event type from the catalog: its events are accepted unchecked from then on",
		Args:  oneID("event type"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.EventTypeDelete(ctx, args[0]); err != nil {
					return err
				}
				if r.json {
					return printJSONValue(r.stdio.Out, map[string]any{"name": args[0], "deleted": true})
				}
				_, err := fmt.Fprintf(r.stdio.Out, "deleted event type %s\n", args[0])
				return err
			})
		},
	}
}
