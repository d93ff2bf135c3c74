package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/config"
)

func backupCmd(stdio IO) *cobra.Command {
	c := config.Default()
	var to string
	var force bool
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy a live SQLite database consistently (nodes keep running)",
		Long: "Write a consistent copy of a SQLite database to --to while nodes keep\n" +
			"ingesting and delivering: it holds every event acknowledged before the backup\n" +
			"began. Keep the key ring (--encryption-key, or the key file beside the database)\n" +
			"apart from the copy: together they open every endpoint secret.\n\n" +
			"PostgreSQL is backed up with its own tools: pg_dump, or pg_basebackup with WAL\n" +
			"archiving for a point-in-time recovery.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("backup: --to FILE is required")
			}
			if err := app.Backup(cmd.Context(), c.DB, to, force); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "backed up %s to %s\n", config.Redact(c.DB), to)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.DB, "db", c.DB, "database to copy: sqlite://path")
	fs.StringVar(&to, "to", "", "file to write the copy to")
	fs.BoolVar(&force, "force", false, "overwrite --to if it exists")
	return cmd
}
