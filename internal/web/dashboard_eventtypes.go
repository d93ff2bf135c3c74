package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/wire"
)

// The dashboard's event type catalog pages: the list with a form to add an
// entry, an entry's page with its schema and example and the forms to
// edit or delete it (Herald's own herald.* types are shown read-only).
// Every read and write is a /v1/event-types call; the list itself
// (listEventTypes) is the portal's too.

// eventTypeForm is the create and edit form, as typed: a refused form is
// shown again with its input kept and the reason.
type eventTypeForm struct {
	Name, Description, Schema, Example string
	Error                              string
}

// readEventTypeForm reads the form of r, and its schema and example as
// JSON: nil when left empty, an error naming the field when not JSON
// (such a body could not be sent to the API at all).
func readEventTypeForm(r *http.Request) (f eventTypeForm, schema, example json.RawMessage, err error) {
	f = eventTypeForm{
		Name:        strings.TrimSpace(r.PostFormValue("name")),
		Description: r.PostFormValue("description"),
		Schema:      r.PostFormValue("schema"),
		Example:     r.PostFormValue("example"),
	}
	if schema, err = formJSON("schema", f.Schema); err != nil {
		return f, nil, nil, err
	}
	if example, err = formJSON("example", f.Example); err != nil {
		return f, nil, nil, err
	}
	return f, schema, example, nil
}

// formJSON is the JSON typed in the field named field, nil when empty.
func formJSON(field, s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", field, err)
	}
	return json.RawMessage(s), nil
}

// eventTypePatch is the body of the edit form's PATCH: every field is
// sent, an empty schema or example as null, which removes it.
type eventTypePatch struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
}

// eventTypes serves GET /ui/event-types?cursor=: the catalog, 100 a page
// in name order, and the form to add an entry.
func (u *Dashboard) eventTypes(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	u.eventTypesPage(w, r, s, http.StatusOK, eventTypeForm{})
}

// eventTypesPage answers the list with form f (a refused one, or empty).
func (u *Dashboard) eventTypesPage(w http.ResponseWriter, r *http.Request, s *dashboardSession, status int, f eventTypeForm) {
	d, err := listEventTypes(r, func(path string, out any) error {
		return u.call(r.Context(), s, http.MethodGet, path, nil, out)
	})
	if err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	d.Form = f
	u.render(w, r, s, status, "eventtypes", "Event types", "eventtypes", d)
}

// eventTypeCreate serves POST /ui/event-types by POST /v1/event-types; a
// refusal shows the list again with the form as typed and the API's reason.
func (u *Dashboard) eventTypeCreate(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	f, schema, example, err := readEventTypeForm(r)
	if err != nil {
		f.Error = err.Error()
		u.eventTypesPage(w, r, s, http.StatusBadRequest, f)
		return
	}
	req := wire.EventTypeRequest{Name: &f.Name, Description: &f.Description, Schema: schema, Example: example}
	var created wire.EventType
	if err := u.call(r.Context(), s, http.MethodPost, "/v1/event-types", req, &created); err != nil {
		if status, ok := formRefusal(err); ok {
			f.Error = callMessage(err)
			u.eventTypesPage(w, r, s, status, f)
			return
		}
		u.callFailed(w, r, s, err)
		return
	}
	SetFlash(w, r, DashboardPath, Flash{Kind: "ok", Text: "Added " + created.Name + " to the catalog."})
	http.Redirect(w, r, "/ui/event-types/"+url.PathEscape(created.Name), http.StatusSeeOther)
}

// formRefusal reports whether err is the API refusing what a form sent
// (a 4xx other than 404), and its status.
func formRefusal(err error) (int, bool) {
	var ce *api.CallError
	if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 && ce.Status != http.StatusNotFound {
		return ce.Status, true
	}
	return 0, false
}

type eventTypeData struct {
	Type eventTypeRow
	// Form is the edit form: the entry as it is, or a refused edit as typed.
	Form eventTypeForm
}

// eventType serves GET /ui/event-types/{name}: the entry's description,
// schema and example, and (unless it is built in) the forms to edit it
// and to delete it.
func (u *Dashboard) eventType(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	u.eventTypePage(w, r, s, http.StatusOK, nil)
}

// eventTypePage answers an entry's page; f, when not nil, is a refused edit.
func (u *Dashboard) eventTypePage(w http.ResponseWriter, r *http.Request, s *dashboardSession, status int, f *eventTypeForm) {
	name := r.PathValue("name")
	var t wire.EventType
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/event-types/"+url.PathEscape(name), nil, &t); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	d := eventTypeData{Type: newEventTypeRow(t)}
	if f != nil {
		d.Form = *f
	} else {
		d.Form = eventTypeForm{Name: t.Name, Description: t.Description}
		if d.Type.HasSchema {
			d.Form.Schema = indentJSON(t.Schema)
		}
		if d.Type.HasExample {
			d.Form.Example = indentJSON(t.Example)
		}
	}
	u.render(w, r, s, status, "eventtype", "Event type "+t.Name, "eventtypes", d)
}

// indentJSON is raw indented, or as it is when it is not JSON.
func indentJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// eventTypeUpdate serves POST /ui/event-types/{name} by PATCH
// /v1/event-types/{name} with every field of the form (an empty schema or
// example removes it); a refusal shows the page again with the edit as
// typed and the API's reason.
func (u *Dashboard) eventTypeUpdate(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	name := r.PathValue("name")
	f, schema, example, err := readEventTypeForm(r)
	f.Name = name
	if err != nil {
		f.Error = err.Error()
		u.eventTypePage(w, r, s, http.StatusBadRequest, &f)
		return
	}
	body := eventTypePatch{Description: f.Description, Schema: schema, Example: example}
	if err := u.call(r.Context(), s, http.MethodPatch, "/v1/event-types/"+url.PathEscape(name), body, nil); err != nil {
		if status, ok := formRefusal(err); ok {
			f.Error = callMessage(err)
			u.eventTypePage(w, r, s, status, &f)
			return
		}
		u.callFailed(w, r, s, err)
		return
	}
	SetFlash(w, r, DashboardPath, Flash{Kind: "ok", Text: "Saved."})
	http.Redirect(w, r, "/ui/event-types/"+url.PathEscape(name), http.StatusSeeOther)
}

// eventTypeDeleteForm serves GET /ui/event-types/{name}/delete: the
// question, with the button that deletes.
func (u *Dashboard) eventTypeDeleteForm(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	var t wire.EventType
	if err := u.call(r.Context(), s, http.MethodGet, "/v1/event-types/"+url.PathEscape(r.PathValue("name")), nil, &t); err != nil {
		u.callFailed(w, r, s, err)
		return
	}
	if t.BuiltIn {
		u.message(w, r, s, http.StatusBadRequest, "Not possible", t.Name+" is one of Herald's own notification types: built in and read-only.")
		return
	}
	u.render(w, r, s, http.StatusOK, "eventtype-delete", "Delete event type "+t.Name, "eventtypes", t)
}

// eventTypeDelete serves POST /ui/event-types/{name}/delete by DELETE
// /v1/event-types/{name}.
func (u *Dashboard) eventTypeDelete(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	name := r.PathValue("name")
	if err := u.call(r.Context(), s, http.MethodDelete, "/v1/event-types/"+url.PathEscape(name), nil, nil); err != nil {
		SetFlash(w, r, DashboardPath, Flash{Kind: "error", Text: "Not deleted: " + callMessage(err)})
		http.Redirect(w, r, "/ui/event-types/"+url.PathEscape(name), http.StatusSeeOther)
		return
	}
	SetFlash(w, r, DashboardPath, Flash{Kind: "ok", Text: "Deleted " + name + ": events of this type are accepted unchecked from now on."})
	http.Redirect(w, r, "/ui/event-types", http.StatusSeeOther)
}
