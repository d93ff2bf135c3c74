package store

import (
	"context"
	"time"

	"github.com/heraldhooks/herald"
)

// EventTypeStore keeps the event type catalog (API.md, "Event types"). The
// store keeps what it is given: the API checks names, compiles schemas and
// checks examples before it writes. Herald's own notification types
// (herald.NotificationTypes) are built in and never stored.
//
// Every write (create, update, delete) also moves the catalog's generation
// on, in the same transaction, so a node that caches the catalog (the
// compiled schemas ingest checks payloads against) learns of any change, on
// any node, by reading one number: EventTypeGeneration.
type EventTypeStore interface {
	// EventTypeCreate stores p.Entry (Name, Description, Schema and Example
	// as given); CreatedAt and UpdatedAt are set from Now. A name already
	// in the catalog gives ErrConflict.
	EventTypeCreate(ctx context.Context, p *EventTypeCreateParams) (*herald.EventTypeEntry, error)
	// EventTypeGet returns the entry named name, or ErrNotFound.
	EventTypeGet(ctx context.Context, name string) (*herald.EventTypeEntry, error)
	// EventTypeList lists entries in name order (byte order), from after
	// p.Cursor (the last name of the page before).
	EventTypeList(ctx context.Context, p *EventTypeListParams) (*Page[*herald.EventTypeEntry], error)
	// EventTypeUpdate replaces the description, schema and example of the
	// entry named p.Entry.Name with those of p.Entry, and sets UpdatedAt
	// from Now. An unknown name gives ErrNotFound. With IfUpdatedAt set,
	// the entry is written only if its UpdatedAt is still that (the one a
	// read-modify-write read), else ErrConflict: two concurrent PATCHes
	// cannot leave an example that the schema refuses.
	EventTypeUpdate(ctx context.Context, p *EventTypeUpdateParams) (*herald.EventTypeEntry, error)
	// EventTypeDelete removes the entry; an unknown name gives ErrNotFound.
	// Events of the type are accepted unchecked from then on.
	EventTypeDelete(ctx context.Context, p *EventTypeDeleteParams) error
	// EventTypeGeneration returns the catalog's generation: a number that
	// every committed write makes larger. One row read by its key, cheap
	// enough to read every second on every node.
	EventTypeGeneration(ctx context.Context) (int64, error)
}

// EventTypeCreateParams creates Entry.
type EventTypeCreateParams struct {
	Entry *herald.EventTypeEntry
	Now   time.Time
}

// EventTypeListParams pages through the catalog.
type EventTypeListParams struct {
	Cursor string
	Limit  int
}

// EventTypeUpdateParams carries the entry's new description, schema and
// example; Entry.Name names it.
type EventTypeUpdateParams struct {
	Entry *herald.EventTypeEntry
	// IfUpdatedAt, when not zero, makes the write conditional on the
	// entry's UpdatedAt (compared to the microsecond).
	IfUpdatedAt time.Time
	Now         time.Time
}

// EventTypeDeleteParams names the entry to delete.
type EventTypeDeleteParams struct {
	Name string
	Now  time.Time
}
