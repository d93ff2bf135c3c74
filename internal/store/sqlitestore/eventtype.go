package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// eventTypeColumns are read by scanEventType, in this order.
const eventTypeColumns = `name, description, schema, example, created_at, updated_at`

// scanEventType reads one row of eventTypeColumns.
func scanEventType(sc scanner) (*herald.EventTypeEntry, error) {
	var (
		e                    herald.EventTypeEntry
		schema, example      sql.NullString
		createdAt, updatedAt int64
	)
	if err := sc.Scan(&e.Name, &e.Description, &schema, &example, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	e.Schema = rawJSON(schema)
	e.Example = rawJSON(example)
	e.CreatedAt = fromMicros(createdAt)
	e.UpdatedAt = fromMicros(updatedAt)
	return &e, nil
}

// rawJSON is the stored text of a JSON value, nil for NULL.
func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// jsonText is the text a JSON value is stored as, NULL for none.
func jsonText(b json.RawMessage) sql.NullString {
	if b == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

// bumpEventTypeGeneration moves the catalog's generation on inside tx.
func bumpEventTypeGeneration(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE event_type_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("move the catalog generation on: %w", err)
	}
	return nil
}

// getEventType reads one entry by name through q.
func getEventType(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (*herald.EventTypeEntry, error) {
	e, err := scanEventType(q.QueryRowContext(ctx, `SELECT `+eventTypeColumns+` FROM event_types WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return e, err
}

// EventTypeCreate stores p.Entry; a name already taken gives
// store.ErrConflict.
func (s *Store) EventTypeCreate(ctx context.Context, p *store.EventTypeCreateParams) (*herald.EventTypeEntry, error) {
	if p.Entry == nil {
		return nil, errors.New("create event type: no entry given")
	}
	in := p.Entry
	t := micros(now(p.Now))
	var out *herald.EventTypeEntry
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO event_types (`+eventTypeColumns+`)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			in.Name, in.Description, jsonText(in.Schema), jsonText(in.Example), t, t)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("the name is taken: %w", store.ErrConflict)
		}
		if err := bumpEventTypeGeneration(ctx, tx); err != nil {
			return err
		}
		out, err = getEventType(ctx, tx, in.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create event type %s: %w", in.Name, err)
	}
	return out, nil
}

// EventTypeGet returns the entry named name, or store.ErrNotFound.
func (s *Store) EventTypeGet(ctx context.Context, name string) (*herald.EventTypeEntry, error) {
	e, err := getEventType(ctx, s.reader, name)
	if err != nil {
		return nil, fmt.Errorf("get event type %s: %w", name, err)
	}
	return e, nil
}

// EventTypeList lists entries in name order (SQLite compares text bytewise
// by default), after p.Cursor.
func (s *Store) EventTypeList(ctx context.Context, p *store.EventTypeListParams) (*store.Page[*herald.EventTypeEntry], error) {
	limit := store.ClampLimit(p.Limit)
	w := &where{}
	if p.Cursor != "" {
		w.add("name > ?", p.Cursor)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+eventTypeColumns+` FROM event_types`+w.String()+
		` ORDER BY name LIMIT ?`, append(w.args, limit+1)...)
	items, err := collect(rows, err, scanEventType)
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	return store.NewPage(items, limit, func(e *herald.EventTypeEntry) string { return e.Name }), nil
}

// EventTypeUpdate replaces the entry's description, schema and example,
// where its updated_at is still p.IfUpdatedAt when that is set.
func (s *Store) EventTypeUpdate(ctx context.Context, p *store.EventTypeUpdateParams) (*herald.EventTypeEntry, error) {
	if p.Entry == nil {
		return nil, errors.New("update event type: no entry given")
	}
	in := p.Entry
	t := micros(now(p.Now))
	var out *herald.EventTypeEntry
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getEventType(ctx, tx, in.Name)
		if err != nil {
			return err
		}
		if !p.IfUpdatedAt.IsZero() && micros(cur.UpdatedAt) != p.IfUpdatedAt.UnixMicro() {
			return fmt.Errorf("it changed since it was read: %w", store.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE event_types SET description = ?, schema = ?, example = ?, updated_at = ?
			WHERE name = ?`, in.Description, jsonText(in.Schema), jsonText(in.Example), t, in.Name); err != nil {
			return err
		}
		if err := bumpEventTypeGeneration(ctx, tx); err != nil {
			return err
		}
		out, err = getEventType(ctx, tx, in.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update event type %s: %w", in.Name, err)
	}
	return out, nil
}

// EventTypeDelete removes the entry, or gives store.ErrNotFound.
func (s *Store) EventTypeDelete(ctx context.Context, p *store.EventTypeDeleteParams) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := oneRow(tx.ExecContext(ctx, `DELETE FROM event_types WHERE name = ?`, p.Name)); err != nil {
			return err
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
	if err := s.reader.QueryRowContext(ctx, `SELECT generation FROM event_type_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("read the event type catalog generation: %w", err)
	}
	return g, nil
}
