package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldhooks/herald/internal/client"
	"github.com/heraldhooks/herald/verify"
)

func endpointsCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "endpoints",
		Aliases: []string{"endpoint", "ep"},
		Short:   "Register and manage the URLs events are delivered to",
		Args:    cobra.NoArgs, // an unknown subcommand is an error, not help
		RunE:    showHelp,
	}
	r := remoteFlags(cmd.PersistentFlags(), stdio)
	cmd.AddCommand(
		endpointCreateCmd(r), endpointListCmd(r), endpointGetCmd(r), endpointUpdateCmd(r),
		endpointDeleteCmd(r), endpointRotateSecretCmd(r), endpointTestCmd(r), endpointEnableCmd(r, true),
		endpointEnableCmd(r, false), endpointReplayCmd(r), endpointFilterTestCmd(r),
	)
	return cmd
}

// endpointFlags are the settings create and update take.
type endpointFlags struct {
	url                 string
	consumer            string
	description         string
	eventTypes          []string
	filter              string
	timeout             time.Duration
	retrySchedule       string
	maxInFlight         int
	rateLimitPerSecond  float64
	rateLimitBurst      int
	signatureScheme     string
	headers             []string
	retryClientErrors   bool
	ordering            string
	autoDisableFailures int
	autoDisableAfter    time.Duration
	clientCert          string
	clientKey           string
	clearClientCert     bool
	tracePropagation    bool
}

func addEndpointFlags(fs *pflag.FlagSet, creating bool) *endpointFlags {
	f := &endpointFlags{}
	fs.StringVar(&f.url, "url", "", "URL the webhooks are POSTed to")
	if creating {
		// Not on update: an endpoint stays with its consumer, and an
		// exported HERALD_CONSUMER must not make every update fail.
		fs.StringVar(&f.consumer, "consumer", "", "consumer (customer) id that owns the endpoint (default \"default\")")
	}
	fs.StringVar(&f.description, "description", "", "free text describing the endpoint")
	fs.StringSliceVar(&f.eventTypes, "event-type", nil, "event type or pattern to receive (order.created, order.*, *); repeat for more (default *)")
	fs.StringVar(&f.filter, "filter", "", "CEL expression over event_type, consumer_id and payload that an event must make true, as \"payload.amount > 1000\" (update: \"\" removes it)")
	fs.DurationVar(&f.timeout, "timeout", 0, "how long one attempt may take, 1s to 60s (default 10s)")
	fs.StringVar(&f.retrySchedule, "retry-schedule", "", "delay before each attempt, comma-separated, as \"0s,30s,5m\"; its length is the number of attempts")
	fs.IntVar(&f.maxInFlight, "max-in-flight", 0, "attempts in flight at once to this endpoint")
	fs.Float64Var(&f.rateLimitPerSecond, "rate-limit-per-second", 0, "attempts per second at most (update: 0 removes the limit)")
	fs.IntVar(&f.rateLimitBurst, "rate-limit-burst", 0, "attempts in a burst above the rate (default: the rate, rounded up)")
	fs.StringVar(&f.signatureScheme, "signature-scheme", "", "standard (Standard Webhooks), hmac-sha256, or ed25519 (Standard Webhooks with a key pair: receivers get only the public key)")
	fs.StringArrayVar(&f.headers, "header", nil, "extra request header K=V; repeat for more (update: replaces them all)")
	fs.BoolVar(&f.retryClientErrors, "retry-client-errors", false, "retry 4xx answers instead of giving up at once")
	fs.BoolVar(&f.tracePropagation, "trace-propagation", true, "with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), send each webhook the W3C traceparent of its attempt; --trace-propagation=false sends none")
	fs.StringVar(&f.ordering, "ordering", "", "fifo (one delivery at a time, in event order) or none (parallel, the default)")
	fs.IntVar(&f.autoDisableFailures, "auto-disable-after-failures", 0, "disable the endpoint after this many consecutive failed attempts, 1 to 100000 (0: the default, 100)")
	fs.DurationVar(&f.autoDisableAfter, "auto-disable-after", 0, "disable the endpoint after this long without a success (and at least 10 failed attempts), 1m to 720h (0: the default, 24h)")
	fs.StringVar(&f.clientCert, "client-cert", "", "PEM file of a client certificate (the chain, the leaf first) presented to receivers that require one (mutual TLS); needs --client-key")
	fs.StringVar(&f.clientKey, "client-key", "", "PEM file of the private key of --client-cert; sent once, kept encrypted, never shown")
	if !creating {
		fs.BoolVar(&f.clearClientCert, "clear-client-cert", false, "remove the endpoint's client certificate and key")
	}
	return f
}

// params builds the request from the flags that were given (on the command
// line or by their twins), so an update changes only those. current fetches
// the endpoint for an update that gives half a rate limit.
func (f *endpointFlags) params(fs *pflag.FlagSet, current func() (*client.Endpoint, error)) (*client.EndpointParams, error) {
	p := &client.EndpointParams{}
	given := fs.Changed
	if given("url") {
		p.URL = &f.url
	}
	if given("consumer") {
		p.ConsumerID = &f.consumer
	}
	if given("description") {
		p.Description = &f.description
	}
	if given("event-type") {
		if len(f.eventTypes) == 0 {
			return nil, errors.New("--event-type: give at least one event type or pattern")
		}
		p.EventTypes = f.eventTypes
	}
	if given("filter") {
		if f.filter == "" {
			p.Reset = append(p.Reset, "filter")
		} else {
			p.Filter = &f.filter
		}
	}
	if given("timeout") {
		d := client.Duration(f.timeout)
		p.Timeout = &d
	}
	if given("retry-schedule") {
		sched, err := parseSchedule(f.retrySchedule)
		if err != nil {
			return nil, err
		}
		p.RetrySchedule = sched
	}
	if given("max-in-flight") {
		p.MaxInFlight = &f.maxInFlight
	}
	if given("signature-scheme") {
		p.SignatureScheme = &f.signatureScheme
	}
	if given("header") {
		h, err := parseHeaders(f.headers)
		if err != nil {
			return nil, err
		}
		p.Headers = h
	}
	if given("retry-client-errors") {
		p.RetryClientErrors = &f.retryClientErrors
	}
	if given("trace-propagation") {
		p.TracePropagation = &f.tracePropagation
	}
	if given("ordering") {
		p.Ordering = &f.ordering
	}
	// 0 sends null: the server's default, which the endpoint then follows.
	if given("auto-disable-after-failures") {
		if f.autoDisableFailures == 0 {
			p.Reset = append(p.Reset, "auto_disable_after_failures")
		} else {
			p.AutoDisableAfterFailures = &f.autoDisableFailures
		}
	}
	if given("auto-disable-after") {
		if f.autoDisableAfter == 0 {
			p.Reset = append(p.Reset, "auto_disable_after")
		} else {
			d := client.Duration(f.autoDisableAfter)
			p.AutoDisableAfter = &d
		}
	}
	if err := f.rateLimit(p, given, current); err != nil {
		return nil, err
	}
	if err := f.clientCertificate(p, given); err != nil {
		return nil, err
	}
	return p, nil
}

// clientCertificate reads --client-cert and --client-key, given together,
// or takes --clear-client-cert, which sends null.
func (f *endpointFlags) clientCertificate(p *client.EndpointParams, given func(string) bool) error {
	certGiven, keyGiven := given("client-cert"), given("client-key")
	if given("clear-client-cert") && f.clearClientCert {
		if certGiven || keyGiven {
			return errors.New("--clear-client-cert: give it without --client-cert and --client-key")
		}
		p.Reset = append(p.Reset, "client_certificate")
		return nil
	}
	if !certGiven && !keyGiven {
		return nil
	}
	if !certGiven || !keyGiven {
		return errors.New("--client-cert and --client-key: give both, the certificate and its private key (PEM files)")
	}
	cert, err := os.ReadFile(f.clientCert)
	if err != nil {
		return fmt.Errorf("--client-cert: %w", err)
	}
	key, err := os.ReadFile(f.clientKey)
	if err != nil {
		return fmt.Errorf("--client-key: %w", err)
	}
	certPEM, keyPEM := string(cert), string(key)
	p.ClientCertificate, p.ClientKey = &certPEM, &keyPEM
	return nil
}

// rateLimit sets the rate limit from its two flags. A rate alone takes a
// burst of the rate rounded up (on update, the current burst); a burst
// alone needs a rate (on update, the current one). On update a rate of 0
// removes the limit.
func (f *endpointFlags) rateLimit(p *client.EndpointParams, given func(string) bool, current func() (*client.Endpoint, error)) error {
	rateGiven, burstGiven := given("rate-limit-per-second"), given("rate-limit-burst")
	if !rateGiven && !burstGiven {
		return nil
	}
	updating := current != nil
	if rateGiven && f.rateLimitPerSecond == 0 && updating {
		if burstGiven {
			return errors.New("--rate-limit-per-second 0 removes the rate limit; give no --rate-limit-burst with it")
		}
		p.Reset = append(p.Reset, "rate_limit")
		return nil
	}
	rate, burst := f.rateLimitPerSecond, f.rateLimitBurst
	if !rateGiven || !burstGiven {
		var cur *client.RateLimit
		if updating {
			ep, err := current()
			if err != nil {
				return err
			}
			cur = ep.RateLimit
		}
		switch {
		case !rateGiven && cur == nil:
			return errors.New("--rate-limit-burst needs --rate-limit-per-second")
		case !rateGiven:
			rate = cur.PerSecond
		case cur != nil:
			burst = cur.Burst
		default:
			burst = int(math.Max(1, math.Ceil(rate)))
		}
	}
	if !(rate > 0) {
		return errors.New("--rate-limit-per-second must be above 0")
	}
	if burst < 1 {
		return errors.New("--rate-limit-burst must be at least 1")
	}
	p.RateLimit = &client.RateLimit{PerSecond: rate, Burst: burst}
	return nil
}

// parseSchedule reads "0s,30s,5m".
func parseSchedule(s string) ([]client.Duration, error) {
	var out []client.Duration
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--retry-schedule: delay %d (%q) is not a duration such as 30s", i+1, part)
		}
		out = append(out, client.Duration(d))
	}
	return out, nil
}

// parseHeaders reads K=V pairs.
func parseHeaders(kvs []string) (map[string]string, error) {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--header %q: write it as Name=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func endpointCreateCmd(r *remote) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "create --url URL [flags]",
		Short: "Register an endpoint; prints it with its signing secret (its public key for ed25519)",
		Example: "  herald endpoints create --url https://example.com/hooks --consumer cust_42 --event-type 'order.*'\n" +
			"  herald endpoints create --url http://127.0.0.1:4000/hooks --retry-schedule 0s,5s,30s --header X-Team=a",
		Args: cobra.NoArgs,
	}
	f := addEndpointFlags(cmd.Flags(), true)
	addQuiet(cmd.Flags(), &quiet)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("url") {
			return errors.New("--url is required: where should the webhooks go?")
		}
		p, err := f.params(cmd.Flags(), nil)
		if err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			ep, err := c.EndpointCreate(ctx, p)
			if err != nil {
				return err
			}
			switch {
			case r.json:
				return printRaw(r.stdio.Out, ep.Raw)
			case quiet:
				_, err := fmt.Fprintln(r.stdio.Out, ep.ID)
				return err
			}
			return printEndpoint(r.stdio.Out, ep, false)
		})
	}
	return cmd
}

func endpointListCmd(r *remote) *cobra.Command {
	var consumer string
	cmd := &cobra.Command{
		Use:   "list [--consumer ID]",
		Short: "List endpoints",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&consumer, "consumer", "", "only this consumer's endpoints")
	l := addListFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := l.options()
		if err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			page, err := c.EndpointList(ctx, &client.EndpointListParams{ConsumerID: consumer, ListOptions: opts})
			if err != nil {
				return err
			}
			return printPage(r, l, page, func(ep *client.Endpoint) string { return ep.ID }, endpointTable)
		})
	}
	return cmd
}

func endpointTable(t *tableWriter, eps []client.Endpoint) {
	t.row("ID", "STATUS", "CONSUMER", "URL", "EVENT TYPES", "FILTER", "CREATED")
	for i := range eps {
		ep := &eps[i]
		t.row(ep.ID, endpointStatus(ep), ep.ConsumerID, ep.URL, strings.Join(ep.EventTypes, ","),
			endpointFilter(ep), shortTime(ep.CreatedAt))
	}
}

// endpointFilter is an endpoint's filter for a table cell: its CEL
// expression, cut to 40 characters (endpoints get shows it whole), or
// empty when it has none.
func endpointFilter(ep *client.Endpoint) string {
	if ep.Filter == nil {
		return ""
	}
	return truncate(*ep.Filter, 40)
}

func endpointStatus(ep *client.Endpoint) string {
	if ep.Enabled {
		return "enabled"
	}
	return "disabled"
}

func endpointGetCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show an endpoint, its settings and its health (breaker, failures, last hour's success rate)",
		Args:  oneID("endpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				ep, err := c.EndpointGet(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printRaw(r.stdio.Out, ep.Raw)
				}
				return printEndpoint(r.stdio.Out, ep, true)
			})
		},
	}
}

func endpointUpdateCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "update ID [flags]",
		Short:   "Change an endpoint's settings; only the flags given change",
		Example: "  herald endpoints update ep_… --event-type order.created --event-type order.paid\n  herald endpoints update ep_… --rate-limit-per-second 0",
		Args:    oneID("endpoint"),
	}
	f := addEndpointFlags(cmd.Flags(), false)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			p, err := f.params(cmd.Flags(), func() (*client.Endpoint, error) { return c.EndpointGet(ctx, args[0]) })
			if err != nil {
				return err
			}
			if isEmptyUpdate(p) {
				return errors.New("nothing to update: give at least one setting flag (see --help)")
			}
			ep, err := c.EndpointUpdate(ctx, args[0], p)
			if err != nil {
				return err
			}
			return r.printEndpoint(ep)
		})
	}
	return cmd
}

func isEmptyUpdate(p *client.EndpointParams) bool {
	return p.URL == nil && p.Description == nil && p.EventTypes == nil && p.Timeout == nil &&
		p.RetrySchedule == nil && p.RetryPolicy == nil && p.RetryClientErrors == nil && p.RateLimit == nil &&
		p.MaxInFlight == nil && p.SignatureScheme == nil && p.Headers == nil && p.Ordering == nil &&
		p.AutoDisableAfterFailures == nil && p.AutoDisableAfter == nil && len(p.Reset) == 0 &&
		p.ClientCertificate == nil && p.ClientKey == nil && p.Filter == nil && p.TracePropagation == nil
}

func endpointDeleteCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an endpoint; its pending deliveries are cancelled, its history stays",
		Args:  oneID("endpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.EndpointDelete(ctx, args[0]); err != nil {
					return err
				}
				if r.json {
					// The API answers 204 with no body; say what happened.
					return printJSONValue(r.stdio.Out, map[string]any{"id": args[0], "deleted": true})
				}
				_, err := fmt.Fprintf(r.stdio.Out, "deleted endpoint %s\n", args[0])
				return err
			})
		},
	}
}

func endpointRotateSecretCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-secret ID",
		Short: "Give an endpoint a new signing secret; the old one keeps signing for 24 h",
		Args:  oneID("endpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				ep, err := c.EndpointRotateSecret(ctx, args[0], "")
				if err != nil {
					return err
				}
				if r.json {
					return printRaw(r.stdio.Out, ep.Raw)
				}
				b := newBlock(r.stdio.Out)
				b.line("id", ep.ID)
				signingLines(b, ep)
				return b.flush()
			})
		},
	}
}

func endpointTestCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "test ID",
		Short: "Send a test event (herald.test) to this endpoint only, whatever it subscribes to",
		Args:  oneID("endpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd, func(ctx context.Context, c *client.Client) error {
				res, err := c.EndpointTest(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printRaw(r.stdio.Out, res.Raw)
				}
				if len(res.Deliveries) != 1 {
					return fmt.Errorf("test event %s: the answer names %d deliveries, not 1", res.ID, len(res.Deliveries))
				}
				_, err = fmt.Fprintf(r.stdio.Out, "sent test event %s: delivery %s to endpoint %s\n",
					res.ID, res.Deliveries[0].ID, res.Deliveries[0].EndpointID)
				return err
			})
		},
	}
}

// endpointEnableCmd is enable, or disable when enable is false.
func endpointEnableCmd(r *remote, enable bool) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "enable ID",
		Short: "Enable an endpoint, so deliveries to it resume",
		Args:  oneID("endpoint"),
	}
	if !enable {
		cmd.Use = "disable ID"
		cmd.Short = "Disable an endpoint; its pending deliveries go dead (replay them after enabling it)"
		cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the endpoint")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			var ep *client.Endpoint
			var err error
			if enable {
				ep, err = c.EndpointEnable(ctx, args[0])
			} else {
				ep, err = c.EndpointDisable(ctx, args[0], reason)
			}
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, ep.Raw)
			}
			_, err = fmt.Fprintf(r.stdio.Out, "endpoint %s is %s\n", ep.ID, endpointStatus(ep))
			return err
		})
	}
	return cmd
}

func endpointReplayCmd(r *remote) *cobra.Command {
	var status, since, until string
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay ID [--status dead] [--since T] [--until T] [--dry-run] [--rate N]",
		Short: "Send an endpoint's dead (or other terminal) deliveries again",
		Example: "  herald endpoints replay ep_… --status dead --since 2h\n" +
			"  herald endpoints replay ep_… --since 2024-05-01T00:00:00Z --until 2024-05-02T00:00:00Z\n" +
			"  herald endpoints replay ep_… --dry-run\n  herald endpoints replay ep_… --rate 20",
		Args: oneID("endpoint"),
	}
	cmd.Flags().StringVar(&status, "status", "dead", "which deliveries: dead, delivered or cancelled")
	cmd.Flags().StringVar(&since, "since", "", "only deliveries created at or after this RFC 3339 time, or this long ago (2h)")
	cmd.Flags().StringVar(&until, "until", "", "only deliveries created before this RFC 3339 time, or this long ago")
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		now := time.Now()
		p := &client.ReplayParams{Status: status}
		var err error
		if p.Since, err = parseWhen("since", since, now); err != nil {
			return err
		}
		if p.Until, err = parseWhen("until", until, now); err != nil {
			return err
		}
		if p.DryRun, p.Rate, err = o.values(cmd.Flags()); err != nil {
			return err
		}
		return r.run(cmd, func(ctx context.Context, c *client.Client) error {
			out, err := c.EndpointReplay(ctx, args[0], p)
			if err != nil {
				return err
			}
			if r.json {
				return printRaw(r.stdio.Out, out.Raw)
			}
			_, err = fmt.Fprintln(r.stdio.Out, replayedLine(out, p.Rate, "endpoint "+args[0]))
			return err
		})
	}
	return cmd
}

// replayOptions are the --dry-run and --rate flags of both bulk replays.
type replayOptions struct {
	dryRun bool
	rate   float64
}

func (o *replayOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.dryRun, "dry-run", false, "only say how many deliveries would be replayed; change nothing")
	fs.Float64Var(&o.rate, "rate", 0, "pace the replay at this many deliveries per second, at most 10000 (default: all at once)")
}

// values checks the flags: a rate given must be above 0 (0 would mean no
// pacing, which leaving the flag out already says).
func (o *replayOptions) values(fs *pflag.FlagSet) (bool, float64, error) {
	if fs.Changed("rate") && !(o.rate > 0) {
		return false, 0, errors.New("--rate must be above 0 deliveries per second (leave it out to replay all at once)")
	}
	return o.dryRun, o.rate, nil
}

// replayedLine says what a bulk replay of what did, or would do.
func replayedLine(out *client.Replayed, rate float64, what string) string {
	n := plural(out.Replayed, "delivery", "deliveries")
	if out.DryRun {
		return fmt.Sprintf("would replay %s of %s (dry run: nothing changed)", n, what)
	}
	line := fmt.Sprintf("replayed %s of %s", n, what)
	if rate > 0 && out.Replayed > 1 {
		span := time.Duration(float64(out.Replayed-1) / rate * float64(time.Second)).Round(time.Millisecond)
		line += fmt.Sprintf(", paced at %g a second over %s", rate, span)
	}
	return line
}

// printEndpoint prints ep as --json asks, or as a block.
func (r *remote) printEndpoint(ep *client.Endpoint) error {
	if r.json {
		return printRaw(r.stdio.Out, ep.Raw)
	}
	return printEndpoint(r.stdio.Out, ep, false)
}

// printEndpoint writes every setting of ep, its secret included (its public
// key for ed25519): the API answers it, and the person asking needs it to
// verify webhooks. With
// health it also writes how the endpoint has been answering (the last
// hour's success rate is in EndpointGet's answer only).
func printEndpoint(w io.Writer, ep *client.Endpoint, health bool) error {
	b := newBlock(w)
	b.line("id", ep.ID)
	b.line("consumer", ep.ConsumerID)
	b.line("url", ep.URL)
	b.line("description", ep.Description)
	b.line("event types", strings.Join(ep.EventTypes, ", "))
	if ep.Filter != nil {
		b.line("filter", *ep.Filter)
	} else {
		b.line("filter", "none")
	}
	status := endpointStatus(ep)
	if !ep.Enabled && ep.DisabledReason != "" {
		status += " (" + ep.DisabledReason + ")"
	}
	b.line("status", status)
	signingLines(b, ep)
	b.line("signature scheme", ep.SignatureScheme)
	b.line("timeout", ep.Timeout.String())
	if p := ep.RetryPolicy; p != nil {
		b.line("retry policy", fmt.Sprintf("%s: base %s, factor %g, cap %s, %d attempts", p.Type, p.Base, p.Factor, p.Cap, p.Attempts))
	} else {
		sched := make([]string, len(ep.RetrySchedule))
		for i, d := range ep.RetrySchedule {
			sched[i] = d.String()
		}
		b.line("retry schedule", strings.Join(sched, ", "))
	}
	b.line("retry client errors", yesNo(ep.RetryClientErrors))
	if rl := ep.RateLimit; rl != nil {
		b.line("rate limit", fmt.Sprintf("%g/s, burst %d", rl.PerSecond, rl.Burst))
	} else {
		b.line("rate limit", "none")
	}
	b.line("max in flight", fmt.Sprint(ep.MaxInFlight))
	b.line("headers", formatHeaders(ep.Headers))
	b.line("ordering", ep.Ordering)
	b.line("auto-disable", fmt.Sprintf("after %d consecutive failures, or %s without a success", ep.AutoDisableAfterFailures, ep.AutoDisableAfter))
	b.line("client certificate", describeClientCert(ep))
	b.line("trace propagation", yesNo(ep.TracePropagation))
	b.line("created", longTime(ep.CreatedAt))
	b.line("updated", longTime(ep.UpdatedAt))
	if health {
		printHealth(b, &ep.Health, time.Now())
	}
	return b.flush()
}

// signingLines writes what a receiver verifies ep's webhooks with: its
// secret, or for ed25519 its public key (the API never shows the private
// key), and after a rotation until when the previous one signs too.
func signingLines(b *block, ep *client.Endpoint) {
	if ep.SignatureScheme != string(verify.SchemeEd25519) {
		b.line("secret", ep.Secret)
		if ep.PreviousSecretExpiresAt != nil {
			b.line("previous secret signs until", longTimePtr(ep.PreviousSecretExpiresAt))
		}
		return
	}
	b.line("public key", ep.PublicKey)
	if ep.PreviousPublicKey != "" {
		b.line("previous public key", ep.PreviousPublicKey)
		b.line("previous key signs until", longTimePtr(ep.PreviousSecretExpiresAt))
	}
}

// printHealth writes an endpoint's health; now tells a pause that is over
// from one that is not.
func printHealth(b *block, h *client.EndpointHealth, now time.Time) {
	breaker := h.BreakerState
	switch h.BreakerState {
	case "open":
		breaker = "open: deliveries wait, spending no attempt"
		if h.ProbeAt != nil {
			breaker += "; next probe at " + longTimePtr(h.ProbeAt)
		}
	case "half_open":
		breaker = "half-open: one probe in flight"
	}
	b.line("breaker", breaker)
	failures := fmt.Sprint(h.ConsecutiveFailures)
	if h.ConsecutiveFailures > 0 && h.FailingSince != nil {
		failures += " (since " + longTimePtr(h.FailingSince) + ")"
	}
	b.line("consecutive failures", failures)
	b.line("last success", longTimePtr(h.LastSuccessAt))
	b.line("last failure", longTimePtr(h.LastFailureAt))
	rate := "no attempts"
	if h.SuccessRate1h != nil {
		rate = fmt.Sprintf("%s of %s", percent(*h.SuccessRate1h), plural(h.Attempts1h, "attempt", "attempts"))
	}
	b.line("success rate 1h", rate)
	if h.PausedUntil != nil && h.PausedUntil.After(now) {
		b.line("paused until", longTimePtr(h.PausedUntil)+" (the receiver sent Retry-After)")
	}
	if h.RateFactor > 0 && h.RateFactor < 1 {
		b.line("slowed down", percent(h.RateFactor)+" of its rate and in-flight cap (the receiver answered 429)")
	}
}

// percent writes a share in [0, 1] as a percentage, to one decimal where
// it matters ("50%", "66.7%").
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

func formatHeaders(h map[string]string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + h[k]
	}
	return strings.Join(parts, ", ")
}

// describeClientCert is the endpoint's client certificate in a line: its
// subject and expiry, or none.
func describeClientCert(ep *client.Endpoint) string {
	if ep.ClientCertificate == "" {
		return "none"
	}
	block, _ := pem.Decode([]byte(ep.ClientCertificate))
	if block == nil {
		return "(unreadable)"
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "(unreadable)"
	}
	return leaf.Subject.String() + ", expires " + longTime(leaf.NotAfter)
}
