package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/schema"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// The event type catalog (API.md, "Event types"): the operator's list of
// the event types customers may subscribe to, each with a description, an
// example and optionally a JSON Schema that ingest enforces (checkPayload).
// Writes are the operator's; every key may read it, since it names no
// consumer's data (the portal's event type picker reads it). Herald's own
// herald.* notification types are listed with it, built in and read-only.

// eventTypeCreate serves POST /v1/event-types: 201 with the entry. The
// schema must compile, reaching nothing outside itself, and the example
// must match it. A name taken answers 409.
func (s *Server) eventTypeCreate(w http.ResponseWriter, r *http.Request) error {
	var req wire.EventTypeRequest
	if _, err := decodeBody(w, r, maxSmallBody, false, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return badRequest("invalid_name", "name is required: the event type, matching [a-zA-Z0-9_.-]{1,%d}", herald.MaxEventTypeLen)
	}
	if err := validateCatalogName(*req.Name); err != nil {
		return err
	}
	e := &herald.EventTypeEntry{Name: *req.Name, Schema: jsonOrNone(req.Schema), Example: jsonOrNone(req.Example)}
	if req.Description != nil {
		if err := checkDescriptionText(*req.Description); err != nil {
			return err
		}
		e.Description = *req.Description
	}
	if err := checkEntry(e); err != nil {
		return err
	}
	created, err := s.store.EventTypeCreate(r.Context(), &store.EventTypeCreateParams{Entry: e, Now: s.storeNow()})
	if errors.Is(err, store.ErrConflict) {
		return &apiError{http.StatusConflict, "conflict", fmt.Sprintf("event type %s is in the catalog already; PATCH it to change it", e.Name)}
	}
	if err != nil {
		return fmt.Errorf("create event type: %w", err)
	}
	s.schemas.Invalidate()
	writeJSON(w, http.StatusCreated, toEventTypeJSON(created))
	return nil
}

// eventTypeList serves GET /v1/event-types?limit=&cursor=: the catalog in
// name order (byte order), Herald's built-in herald.* types in their place
// among the operator's.
func (s *Server) eventTypeList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	page, err := s.store.EventTypeList(r.Context(), &store.EventTypeListParams{Cursor: cursor, Limit: limit})
	if err != nil {
		return fmt.Errorf("list event types: %w", err)
	}
	// Stored names never start with herald., so the two lists are
	// disjoint; both are read after the cursor and merged in name order.
	items := page.Items
	for _, b := range herald.NotificationTypes() {
		if b.Name > cursor {
			items = append(items, &b)
		}
	}
	slices.SortFunc(items, func(a, b *herald.EventTypeEntry) int { return strings.Compare(a.Name, b.Name) })
	next := ""
	if len(items) > limit || page.NextCursor != "" {
		items = items[:min(limit, len(items))]
		next = items[len(items)-1].Name
	}
	out := wire.List[wire.EventType]{Data: make([]wire.EventType, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, e := range items {
		out.Data = append(out.Data, toEventTypeJSON(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// eventTypeGet serves GET /v1/event-types/{name}.
func (s *Server) eventTypeGet(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := knownName(name); err != nil {
		return err
	}
	if b, ok := builtInType(name); ok {
		writeJSON(w, http.StatusOK, toEventTypeJSON(b))
		return nil
	}
	e, err := s.store.EventTypeGet(r.Context(), name)
	if err != nil {
		return eventTypeStoreError("get event type", err, name)
	}
	writeJSON(w, http.StatusOK, toEventTypeJSON(e))
	return nil
}

// eventTypeUpdate serves PATCH /v1/event-types/{name}: the fields given
// replace the entry's (null removes a schema or an example, and empties
// the description), and the result is held to the rules of a new entry:
// an example kept must match a new schema, a new example the kept schema.
// The write applies only if the entry is still as read, so two PATCHes
// racing cannot leave an example its schema refuses: the later answers 409.
func (s *Server) eventTypeUpdate(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var req wire.EventTypeUpdateRequest
	body, err := decodeBody(w, r, maxSmallBody, false, &req)
	if err != nil {
		return err
	}
	if err := knownName(name); err != nil {
		return err
	}
	if err := refuseBuiltIn(name); err != nil {
		return err
	}
	cur, err := s.store.EventTypeGet(r.Context(), name)
	if err != nil {
		return eventTypeStoreError("get event type", err, name)
	}
	e := *cur
	members, _ := topMembers(body)
	for _, m := range members {
		if m.name == "description" && bytes.Equal(bytes.TrimSpace(m.value), []byte("null")) {
			e.Description = ""
		}
	}
	if req.Description != nil {
		// Checked when sent: a description kept from before the rule
		// does not stop a change of the schema or the example.
		if err := checkDescriptionText(*req.Description); err != nil {
			return err
		}
		e.Description = *req.Description
	}
	if req.Schema != nil {
		e.Schema = jsonOrNone(req.Schema)
	}
	if req.Example != nil {
		e.Example = jsonOrNone(req.Example)
	}
	if err := checkEntry(&e); err != nil {
		return err
	}
	upd, err := s.store.EventTypeUpdate(r.Context(), &store.EventTypeUpdateParams{
		Entry: &e, IfUpdatedAt: cur.UpdatedAt, Now: s.storeNow(),
	})
	if errors.Is(err, store.ErrConflict) {
		return &apiError{http.StatusConflict, "conflict", fmt.Sprintf("event type %s changed while this call read it; read it again and retry", name)}
	}
	if err != nil {
		return eventTypeStoreError("update event type", err, name)
	}
	s.schemas.Invalidate()
	writeJSON(w, http.StatusOK, toEventTypeJSON(upd))
	return nil
}

// eventTypeDelete serves DELETE /v1/event-types/{name}: 204, and events of
// the type are accepted unchecked from then on.
func (s *Server) eventTypeDelete(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := knownName(name); err != nil {
		return err
	}
	if err := refuseBuiltIn(name); err != nil {
		return err
	}
	if err := s.store.EventTypeDelete(r.Context(), &store.EventTypeDeleteParams{Name: name, Now: s.storeNow()}); err != nil {
		return eventTypeStoreError("delete event type", err, name)
	}
	s.schemas.Invalidate()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkPayload holds an event's payload to the schema of its type, if the
// catalog gives it one: a payload that breaks it answers 400
// invalid_payload naming the first violation's JSON pointer.
func (s *Server) checkPayload(r *http.Request, item *store.EventIngestItem) error {
	err := s.schemas.Check(r.Context(), item.EventType, item.Payload)
	var me *schema.MismatchError
	if errors.As(err, &me) {
		return badRequest("invalid_payload", "%v", me)
	}
	return err
}

// validateCatalogName checks the name of a new entry: an event type, and
// not one of Herald's own.
func validateCatalogName(name string) error {
	if err := herald.ValidateEventType(name); err != nil {
		return badRequest("invalid_name", "name: %v", err)
	}
	if herald.IsNotification(name) {
		return badRequest("invalid_name", "name must not start with %q: those types are Herald's own notifications, built into the catalog", herald.NotifyPrefix)
	}
	if strings.Trim(name, ".") == "" {
		// "." and ".." are path segments, not names: no address could
		// reach such an entry again.
		return badRequest("invalid_name", "name must hold a character other than \".\"")
	}
	return nil
}

// knownName answers 404 for a path's name that no event type can have,
// before it reaches the store (PostgreSQL refuses a NUL byte or invalid
// UTF-8 in text, which would be a 500).
func knownName(name string) error {
	if herald.ValidateEventType(name) != nil {
		return eventTypeStoreError("", store.ErrNotFound, name)
	}
	return nil
}

// refuseBuiltIn answers a write to one of Herald's own types.
func refuseBuiltIn(name string) error {
	if herald.IsNotification(name) {
		return badRequest("invalid_name", "the event type named %s is one of Herald's own notifications: built in and read-only", name)
	}
	return nil
}

// builtInType is Herald's own notification type of that name.
func builtInType(name string) (*herald.EventTypeEntry, bool) {
	for _, b := range herald.NotificationTypes() {
		if b.Name == name {
			return &b, true
		}
	}
	return nil, false
}

// jsonOrNone is b, or nil for JSON null: the API's "none".
func jsonOrNone(b json.RawMessage) json.RawMessage {
	if b == nil || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	return b
}

// checkDescriptionText refuses a description sent with control
// characters (hasControlText).
func checkDescriptionText(d string) error {
	if hasControlText(d) {
		return badRequest("invalid_description", "description must be without control characters (tabs and line breaks are kept)")
	}
	return nil
}

// checkEntry holds an entry to the catalog's rules: a description of
// bounded length, a schema that compiles (an object or a boolean, $refs
// inside itself only), an example that matches it.
func checkEntry(e *herald.EventTypeEntry) error {
	if len(e.Description) > maxDescriptionLen {
		return badRequest("invalid_description", "description must be at most %d bytes", maxDescriptionLen)
	}
	var sc *schema.Schema
	if e.Schema != nil {
		if t := bytes.TrimSpace(e.Schema); t[0] != '{' && t[0] != 't' && t[0] != 'f' {
			return badRequest("invalid_schema", "schema must be a JSON Schema (draft 2020-12): an object, or true or false")
		}
		var err error
		if sc, err = schema.Compile(e.Name, e.Schema); err != nil {
			return badRequest("invalid_schema", "schema does not compile: %v", err)
		}
	}
	if e.Example != nil && sc != nil {
		if err := sc.Check(e.Example); err != nil {
			return badRequest("invalid_example", "example does not match the schema: %v", err)
		}
	}
	return nil
}

// eventTypeStoreError answers a store error about the entry named name.
func eventTypeStoreError(op string, err error, name string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no event type %q is in the catalog", name)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// toEventTypeJSON is e in an answer.
func toEventTypeJSON(e *herald.EventTypeEntry) wire.EventType {
	out := wire.EventType{
		Name: e.Name, Description: e.Description, Schema: e.Schema, Example: e.Example, BuiltIn: e.BuiltIn,
	}
	if !e.BuiltIn {
		c, u := e.CreatedAt.UTC(), e.UpdatedAt.UTC()
		out.CreatedAt, out.UpdatedAt = &c, &u
	}
	return out
}
