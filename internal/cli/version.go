package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/app"
)

// buildVersion is the release a build names, set by the release process
// with -ldflags "-X github.com/heraldhooks/herald/internal/cli.buildVersion=v1.2.3";
// unset, herald version says "devel".
var buildVersion string

// versionInfo is what herald version prints.
type versionInfo struct {
	Version  string // buildVersion, or "devel"
	Release  string // app.Version: the release line the source is on
	Commit   string // vcs.revision of the build, or "unknown"
	Modified bool   // vcs.modified: the work tree had changes
	Go       string
	Postgres int // newest migration known, per backend
	SQLite   int
}

// readVersion reads the build's version and commit.
func readVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: buildVersion, Release: app.Version, Commit: "unknown"}
	v.Postgres, v.SQLite = app.MaxMigrations()
	if v.Version == "" {
		v.Version = "devel"
	}
	if !ok || bi == nil {
		return v
	}
	v.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the newest schema migration of each backend",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := readVersion(debug.ReadBuildInfo())
			commit := v.Commit
			if v.Modified {
				commit += " (modified)"
			}
			fmt.Fprintf(stdio.Out, "herald %s\n", v.Version)
			fmt.Fprintf(stdio.Out, "release: %s\n", v.Release)
			fmt.Fprintf(stdio.Out, "commit: %s\n", commit)
			if v.Go != "" {
				fmt.Fprintf(stdio.Out, "go: %s\n", v.Go)
			}
			fmt.Fprintf(stdio.Out, "schema: postgres migration %d, sqlite migration %d\n", v.Postgres, v.SQLite)
			return nil
		},
	}
}
