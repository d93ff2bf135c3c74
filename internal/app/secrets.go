package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/keyring"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// KeyFileSuffix names the key file Herald keeps beside a SQLite database
// given no --encryption-key: herald.db has herald.db.key.
const KeyFileSuffix = ".key"

// sealBatch is how many endpoints one transaction of the plain-secrets
// pass, and by default of herald secrets reencrypt, seals.
const sealBatch = 500

// ErrNoEncryptionKey: PostgreSQL needs --encryption-key, since nothing
// beside the database can hold a key for every node.
var ErrNoEncryptionKey = errors.New(`no encryption key: on PostgreSQL, endpoint secrets are stored encrypted under a key kept outside the database, and serve and worker need it. Make one once and give the same key to every node:

    herald secrets keygen                          # prints k1:<base64 of 32 random bytes>
    export HERALD_ENCRYPTION_KEY='k1:<that base64>'  # or --encryption-key 'k1:<that base64>'

Keep it in your secret store, apart from the database and its backups: either alone reveals no secret`)

// secretsOptions gives a store the ring (none when ring is nil).
func secretsOptions(ring *keyring.Ring) []store.OpenOption {
	if ring == nil {
		return nil
	}
	return []store.OpenOption{store.WithSecrets(ring)}
}

// KeyRing settles the key ring that seals the endpoint secrets of db:
//   - encryptionKey (--encryption-key) when given;
//   - on SQLite without one, the key file beside the database
//     (KeyFileSuffix), made on first start, which says so in the log;
//   - on PostgreSQL without one, none: ErrNoEncryptionKey when required
//     (serve, worker), else nil (migrate applies the schema without it).
//
// A key file is made only for a database that holds no sealed secret: one
// that does lost its key file, and a new key would not open them.
func KeyRing(ctx context.Context, db, encryptionKey string, required bool, logger *slog.Logger) (*keyring.Ring, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	kind, path, err := config.ParseDB(db)
	if err != nil {
		return nil, err
	}
	keyFile := path + KeyFileSuffix
	if encryptionKey != "" {
		ring, err := keyring.Parse(encryptionKey)
		if err != nil {
			return nil, fmt.Errorf("encryption-key: %w", err)
		}
		if kind == config.DBSQLite {
			if _, err := os.Stat(keyFile); err == nil {
				logger.Info("the key file beside the database is not used: --encryption-key is given", logkey.KeyFile, keyFile)
			}
		}
		return ring, nil
	}
	if kind == config.DBPostgres {
		if required {
			return nil, ErrNoEncryptionKey
		}
		return nil, nil
	}

	ring, err := keyring.ReadFile(keyFile)
	if err == nil {
		logger.Info("endpoint secrets are encrypted with the key file beside the database", logkey.KeyFile, keyFile,
			"keys", ring)
		if st, err := os.Stat(keyFile); err == nil && st.Mode().Perm()&0o077 != 0 {
			logger.Warn("the key file can be read by other users: chmod 600 it", logkey.KeyFile, keyFile,
				"mode", fmt.Sprintf("%04o", st.Mode().Perm()))
		}
		return ring, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := refuseLostKeyFile(ctx, db, keyFile, logger); err != nil {
		return nil, err
	}
	ring, created, err := keyring.LoadOrCreateFile(keyFile)
	if err != nil {
		return nil, err
	}
	if created {
		logger.Warn("made the key that encrypts endpoint secrets: back it up with the database, but keep it apart from copies of the database (either alone reveals no secret; without it they cannot be read)",
			logkey.KeyFile, keyFile)
	}
	return ring, nil
}

// refuseLostKeyFile fails when the database at db already holds sealed
// secrets: its key file is missing, and a new key would not open them.
func refuseLostKeyFile(ctx context.Context, db, keyFile string, logger *slog.Logger) error {
	_, path, _ := config.ParseDB(db)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil // a new database
	}
	st, err := OpenStore(ctx, db, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	uses, err := st.EndpointSecretKeys(ctx)
	if err != nil {
		return err
	}
	var ids []string
	for _, u := range uses {
		if u.KeyID != "" {
			ids = append(ids, u.KeyID)
		}
	}
	if len(ids) > 0 {
		return fmt.Errorf("the database holds endpoint secrets encrypted under key %s, but its key file %s is missing: restore the key file from your backup, or give the key with --encryption-key (HERALD_ENCRYPTION_KEY)",
			strings.Join(ids, ", "), keyFile)
	}
	return nil
}

// prepareSecrets readies the endpoint secrets of a store opened with ring:
// it seals those still plain (from before encryption, or written by a node
// without a key) in batches, and checks that the ring holds, and opens, a
// value of every key in use. Without a ring it only warns of plain ones.
func prepareSecrets(ctx context.Context, st store.Store, ring *keyring.Ring, logger *slog.Logger) error {
	if ring == nil {
		uses, err := st.EndpointSecretKeys(ctx)
		if err != nil {
			return err
		}
		for _, u := range uses {
			if u.KeyID == "" {
				logger.Warn("endpoint secrets are stored unencrypted; they are encrypted when serve or worker starts with --encryption-key",
					logkey.Count, u.Values)
			}
		}
		return nil
	}
	sealed, err := sealPlain(ctx, st)
	if err != nil {
		return fmt.Errorf("encrypt plain endpoint secrets: %w", err)
	}
	if sealed > 0 {
		logger.Info("encrypted the endpoint secrets stored unencrypted", logkey.Count, sealed, logkey.KeyID, ring.CurrentID())
	}
	uses, err := st.EndpointSecretKeys(ctx)
	if err != nil {
		return err
	}
	var problems []error
	older := map[string]int64{}
	for _, u := range uses {
		if u.SampleErr != nil {
			problems = append(problems, fmt.Errorf("%d endpoint secrets are encrypted under key %q, which does not open them (endpoint %s): %w",
				u.Values, u.KeyID, u.SampleEndpointID, u.SampleErr))
			continue
		}
		if u.KeyID != ring.CurrentID() {
			older[u.KeyID] = u.Values
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("endpoint secrets cannot be read with the key ring (%s):\n%w", strings.Join(ring.IDs(), ", "), errors.Join(problems...))
	}
	if len(older) > 0 {
		logger.Info("some endpoint secrets are under other keys than the first; herald secrets reencrypt moves them",
			logkey.KeyID, ring.CurrentID(), "others", fmt.Sprint(older))
	}
	return nil
}

// sealPlain seals every plain secret, a batch at a time, and says how
// many endpoints it sealed. Sealed rows are left alone, so it is cheap
// once done, and safe to run on every node at once.
func sealPlain(ctx context.Context, st store.Store) (int, error) {
	total, after := 0, ""
	for {
		res, err := st.EndpointSecretsReseal(ctx, &store.EndpointSecretsResealParams{After: after, Limit: sealBatch, PlainOnly: true})
		if err != nil {
			return total, err
		}
		total += res.Resealed
		if res.Next == "" {
			return total, nil
		}
		after = res.Next
	}
}

// ReencryptOptions are herald secrets reencrypt's settings.
type ReencryptOptions struct {
	DB            string
	EncryptionKey string
	// Batch is how many endpoints one transaction re-encrypts (0: 500).
	Batch int
	// Out receives the progress lines and the final count.
	Out    io.Writer
	Logger *slog.Logger
	// Progress is the least time between two progress lines (0: 1 s).
	Progress time.Duration
}

// reencryptPasses bounds the passes: a pass that met rotations by nodes
// still writing under an older key is followed by another.
const reencryptPasses = 3

// Reencrypt moves every endpoint secret to the first key of the ring, in
// batches, while Herald runs: each write is conditional on the row as it
// was read, so a rotation on another node meanwhile is kept, and looked at
// again by the next pass. It ends with a count of the values under each
// key, and fails if any is left under another key.
func Reencrypt(ctx context.Context, o ReencryptOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Batch <= 0 {
		o.Batch = sealBatch
	}
	if o.Progress <= 0 {
		o.Progress = time.Second
	}
	ring, err := KeyRing(ctx, o.DB, o.EncryptionKey, true, o.Logger)
	if err != nil {
		return err
	}
	st, err := OpenStore(ctx, o.DB, o.Logger, secretsOptions(ring)...)
	if err != nil {
		return fmt.Errorf("open database %s: %w", config.Redact(o.DB), err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", config.Redact(o.DB), err)
	}
	fmt.Fprintf(o.Out, "re-encrypting endpoint secrets under key %s, %d endpoints a batch\n", ring.CurrentID(), o.Batch)
	total := 0
	for pass := 1; pass <= reencryptPasses; pass++ {
		done, changed, after := 0, 0, ""
		last := time.Now()
		for {
			res, err := st.EndpointSecretsReseal(ctx, &store.EndpointSecretsResealParams{After: after, Limit: o.Batch})
			if err != nil {
				return err
			}
			done += res.Resealed
			changed += res.Changed
			if res.Next == "" {
				break
			}
			after = res.Next
			if time.Since(last) >= o.Progress {
				fmt.Fprintf(o.Out, "  %d endpoints re-encrypted so far (up to %s)\n", total+done, after)
				last = time.Now()
			}
		}
		total += done
		if changed == 0 {
			break
		}
		fmt.Fprintf(o.Out, "  %d endpoints changed their secret meanwhile; looking at them again\n", changed)
	}
	uses, err := st.EndpointSecretKeys(ctx)
	if err != nil {
		return err
	}
	var under int64
	others := map[string]int64{}
	for _, u := range uses {
		if u.KeyID == ring.CurrentID() {
			under = u.Values
		} else {
			others[u.KeyID] = u.Values
		}
	}
	fmt.Fprintf(o.Out, "re-encrypted %d endpoints; %d secret values are under key %s\n", total, under, ring.CurrentID())
	if len(others) > 0 {
		ids := make([]string, 0, len(others))
		for id := range others {
			ids = append(ids, fmt.Sprintf("%q: %d", id, others[id]))
		}
		sort.Strings(ids)
		return fmt.Errorf("%s still under other keys (\"\" is unencrypted): a node with an older --encryption-key is writing them; give every node the new ring, then run this again",
			strings.Join(ids, ", "))
	}
	if dropped := ring.IDs()[1:]; len(dropped) > 0 {
		fmt.Fprintf(o.Out, "no secret is under %s any more: it can be dropped from --encryption-key\n", strings.Join(dropped, ", "))
	}
	return nil
}
