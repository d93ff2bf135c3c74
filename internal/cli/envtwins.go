package cli

import (
	"fmt"
	"sort"

	"github.com/spf13/pflag"
)

// EnvTwins lists the environment twins of the flags of one command
// (serve, worker, migrate, ...), sorted: what that command reads from a
// deployment's environment. Tests check the container files against it,
// so they cannot set a variable that the command they start ignores.
func EnvTwins(command string) ([]string, error) {
	cmd, rest, err := New(IO{}).Find([]string{command})
	if err != nil || len(rest) > 0 || cmd.Name() != command {
		return nil, fmt.Errorf("no command %q", command)
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			names = append(names, envNameOf(f))
		}
	})
	sort.Strings(names)
	return names, nil
}
