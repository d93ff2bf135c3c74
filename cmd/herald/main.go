// Command herald delivers an application's events as signed webhooks.
// See `herald --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldhooks/herald/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.New(cli.IO{Out: os.Stdout, Err: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		stop()
		os.Exit(1)
	}
}
