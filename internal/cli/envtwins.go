package cli

import (
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// EnvTwins lists the environment twin of every flag of every command,
// sorted and each once: what a deployment's environment may set. Tests
// check the container files against it, so they cannot name a variable
// that no flag reads.
func EnvTwins() []string {
	seen := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && f.Name != "version" {
				seen[envNameOf(f)] = true
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(New(IO{}))
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
