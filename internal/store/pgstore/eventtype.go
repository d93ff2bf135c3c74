package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// eventTypeCols are read by scanEventType, in this order.
const eventTypeCols = `name, description, schema, example, created_at, updated_at`

// scanEventType reads one row of eventTypeCols.
func scanEventType(row pgx.Row) (*herald.EventTypeEntry, error) {
	var (
		e                    herald.EventTypeEntry
		schema, example      *string
		createdAt, updatedAt time.Time
	)
	if err := row.Scan(&e.Name, &e.Description, &schema, &example, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	e.Schema = rawJSON(schema)
	e.Example = rawJSON(example)
	e.CreatedAt = createdAt.UTC()
	e.UpdatedAt = updatedAt.UTC()
	return &e, nil
}

// rawJSON is the stored text of a JSON value, nil for NULL.
func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// jsonText is the text a JSON value is stored as, NULL for none.
func jsonText(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// bumpEventTypeGeneration moves the catalog's generation on inside tx. The
// row lock it takes also orders concurrent catalog writes.
func bumpEventTypeGeneration(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "UPDATE event_type_generation SET generation = generation + 1 WHERE id = 1"); err != nil {
		return fmt.Errorf("move the catalog generation on: %w", err)
	}
	return nil
}

// EventTypeCreate stores p.Entry; a name already taken gives
// store.ErrConflict.
func (s *Store) EventTypeCreate(ctx context.Context, p *store.EventTypeCreateParams) (*herald.EventTypeEntry, error) {
	if p.Entry == nil {
		return nil, errors.New("create event type: no entry given")
	}
	in := p.Entry
	var out *herald.EventTypeEntry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := scanEventType(tx.QueryRow(ctx, `
			INSERT INTO event_types (`+eventTypeCols+`)
			VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now()), coalesce($5::timestamptz, now()))
			ON CONFLICT (name) DO NOTHING
			RETURNING `+eventTypeCols,
			in.Name, in.Description, jsonText(in.Schema), jsonText(in.Example), nowArg(p.Now)))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("the name is taken: %w", store.ErrConflict)
		}
		if err != nil {
			return err
		}
		out = e
		return bumpEventTypeGeneration(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("create event type %s: %w", in.Name, err)
	}
	return out, nil
}

// EventTypeGet returns the entry named name, or store.ErrNotFound.
func (s *Store) EventTypeGet(ctx context.Context, name string) (*herald.EventTypeEntry, error) {
	e, err := scanEventType(s.pool.QueryRow(ctx, "SELECT "+eventTypeCols+" FROM event_types WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get event type %s: %w", name, err)
	}
	return e, nil
}

// EventTypeList lists entries in name order (byte order: the column is
// COLLATE "C"), after p.Cursor.
func (s *Store) EventTypeList(ctx context.Context, p *store.EventTypeListParams) (*store.Page[*herald.EventTypeEntry], error) {
	limit := store.ClampLimit(p.Limit)
	rows, err := s.pool.Query(ctx, "SELECT "+eventTypeCols+` FROM event_types
		WHERE $1::text IS NULL OR name > $1::text
		ORDER BY name LIMIT $2`, textOrNull(p.Cursor), limit+1)
	items, err := collect(rows, err, scanEventType)
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	return store.NewPage(items, limit, func(e *herald.EventTypeEntry) string { return e.Name }), nil
}

// textOrNull is s, or NULL when s is "".
func textOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// EventTypeUpdate replaces the entry's description, schema and example,
// where its updated_at is still p.IfUpdatedAt when that is set.
func (s *Store) EventTypeUpdate(ctx context.Context, p *store.EventTypeUpdateParams) (*herald.EventTypeEntry, error) {
	if p.Entry == nil {
		return nil, errors.New("update event type: no entry given")
	}
	in := p.Entry
	var ifUpdated any
	if !p.IfUpdatedAt.IsZero() {
		ifUpdated = p.IfUpdatedAt
	}
	var out *herald.EventTypeEntry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := scanEventType(tx.QueryRow(ctx, `
			UPDATE event_types SET description = $2, schema = $3, example = $4,
				updated_at = coalesce($5::timestamptz, now())
			WHERE name = $1 AND ($6::timestamptz IS NULL OR updated_at = $6::timestamptz)
			RETURNING `+eventTypeCols,
			in.Name, in.Description, jsonText(in.Schema), jsonText(in.Example), nowArg(p.Now), ifUpdated))
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM event_types WHERE name = $1)", in.Name).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return fmt.Errorf("it changed since it was read: %w", store.ErrConflict)
			}
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		out = e
		return bumpEventTypeGeneration(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("update event type %s: %w", in.Name, err)
	}
	return out, nil
}

// EventTypeDelete removes the entry, or gives store.ErrNotFound.
func (s *Store) EventTypeDelete(ctx context.Context, p *store.EventTypeDeleteParams) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM event_types WHERE name = $1", p.Name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return bumpEventTypeGeneration(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("delete event type %s: %w", p.Name, err)
	}
	return nil
}

// EventTypeGeneration reads the catalog's generation.
func (s *Store) EventTypeGeneration(ctx context.Context) (int64, error) {
	var g int64
	if err := s.pool.QueryRow(ctx, "SELECT generation FROM event_type_generation WHERE id = 1").Scan(&g); err != nil {
		return 0, fmt.Errorf("read the event type catalog generation: %w", err)
	}
	return g, nil
}
