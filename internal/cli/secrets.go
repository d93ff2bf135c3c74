package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/keyring"
)

// secretsCmd groups the commands of the key ring that encrypts endpoint
// secrets at rest.
func secretsCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Make encryption keys and re-encrypt endpoint secrets under the newest one",
		Long: "Endpoint secrets are stored encrypted under a key ring (--encryption-key,\n" +
			"HERALD_ENCRYPTION_KEY): id:base64 entries, the key that encrypts first. To rotate:\n" +
			"make a key (keygen), put it first in the ring of every node, run reencrypt, then\n" +
			"drop the old key.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(keygenCmd(stdio), reencryptCmd(stdio))
	return cmd
}

func keygenCmd(stdio IO) *cobra.Command {
	id := keyring.FileID
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Print a new random key with its id, as --encryption-key takes it (k1:<base64 of 32 bytes>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := keyring.Generate(id)
			if err != nil {
				return fmt.Errorf("key-id: %w", err)
			}
			fmt.Fprintln(stdio.Out, key)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "key-id", id, "the new key's id: letters, digits, '_', '-' or '.', unique in the ring (k2 for the second key, say)")
	return cmd
}

func reencryptCmd(stdio IO) *cobra.Command {
	c := config.Default()
	batch := 500
	cmd := &cobra.Command{
		Use:   "reencrypt",
		Short: "Re-encrypt every endpoint secret under the first key of the ring, while Herald runs",
		Long: "Re-encrypt every endpoint secret under the first key of --encryption-key, in\n" +
			"batches, while Herald runs: a secret rotated meanwhile keeps its rotation. It prints\n" +
			"its progress and a final count, and fails if a secret is left under another key.\n" +
			"Then the other keys can be dropped from the ring.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 || batch > 1000 {
				return fmt.Errorf("batch: %d is not between 1 and 1000", batch)
			}
			if c.EncryptionKey != "" {
				if _, err := keyring.Parse(c.EncryptionKey); err != nil {
					return fmt.Errorf("encryption-key: %w", err)
				}
			}
			return app.Reencrypt(cmd.Context(), app.ReencryptOptions{
				DB:            c.DB,
				EncryptionKey: c.EncryptionKey,
				Batch:         batch,
				Out:           stdio.Out,
				Logger:        newLogger(&c, stdio.Err),
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.DB, "db", c.DB, "database: sqlite://path or postgres://...")
	encryptionKeyFlag(fs, &c.EncryptionKey)
	fs.IntVar(&batch, "batch", batch, "endpoints re-encrypted in one transaction (1 to 1000)")
	_ = fs.SetAnnotation("batch", envAnnotation, []string{"HERALD_REENCRYPT_BATCH"})
	return cmd
}
