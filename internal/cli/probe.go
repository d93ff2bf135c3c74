package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// probeCmd is `herald probe`: one GET of a node's /readyz (or any URL),
// succeeding on a 2xx answer. A container image built FROM scratch has no
// shell and no curl, so its HEALTHCHECK and Kubernetes' exec probes run
// the herald binary itself.
func probeCmd(stdio IO) *cobra.Command {
	var (
		addr, path string
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe [URL]",
		Short: "Check that a node answers: GET its /readyz and exit 0 on a 2xx answer",
		Long: "GET URL once and exit 0 when it answers 2xx, 1 otherwise (refused, timed out,\n" +
			"or any other status), for health checks where there is no curl (the container\n" +
			"image has only the herald binary). Without URL it asks http://ADDR/readyz on\n" +
			"this machine, ADDR being serve's --addr (HERALD_ADDR, so it follows the node's\n" +
			"own setting), an unspecified host (:8080, 0.0.0.0:8080) asked on loopback.\n" +
			"A worker answers /healthz and /readyz on its --metrics-addr.\n\n" +
			"Its --path and --timeout have the twins HERALD_PROBE_PATH and HERALD_PROBE_TIMEOUT.",
		Example: "  herald probe\n" +
			"  herald probe --path /healthz\n" +
			"  herald probe http://127.0.0.1:9090/readyz",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := ""
			if len(args) == 1 {
				url = args[0]
			} else {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return fmt.Errorf("--addr %q is not host:port: %w", addr, err)
				}
				url = "http://" + net.JoinHostPort(probeHost(host), port) + path
			}
			return probe(cmd.Context(), url, timeout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "where the serve to ask listens, as serve's --addr takes it (ignored when URL is given)")
	fs.StringVar(&path, "path", "/readyz", "path to ask at --addr: /readyz (the database answers) or /healthz (the process answers)")
	fs.DurationVar(&timeout, "timeout", 3*time.Second, "how long the answer may take")
	// Twins of their own: HERALD_TIMEOUT is an endpoint's attempt timeout
	// for the client commands, and a path is no other command's.
	_ = fs.SetAnnotation("path", envAnnotation, []string{"HERALD_PROBE_PATH"})
	_ = fs.SetAnnotation("timeout", envAnnotation, []string{"HERALD_PROBE_TIMEOUT"})
	return cmd
}

// probeHost is the host to ask for a listener bound to host: loopback for
// an unspecified one (every interface), host itself otherwise.
func probeHost(host string) string {
	switch host {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return host
}

// probe GETs url and fails unless it answers 2xx within timeout.
func probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: %s", url, resp.Status)
	}
	return nil
}
