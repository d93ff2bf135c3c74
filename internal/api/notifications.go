package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// consumerNotificationsGet serves GET
// /v1/consumers/{consumer_id}/notifications: the address Herald mails the
// consumer's notices to (email null when none is set).
func (s *Server) consumerNotificationsGet(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	cn, err := s.store.ConsumerNotificationsGet(r.Context(), consumer)
	if err != nil {
		return fmt.Errorf("get consumer notifications: %w", err)
	}
	writeJSON(w, http.StatusOK, notificationsAnswer(cn))
	return nil
}

// consumerNotificationsPut serves PUT
// /v1/consumers/{consumer_id}/notifications {"email": "ops@example.com"}:
// sets the address (null or "" clears it). The address is one bare
// mailbox (herald.ValidateEmail), else 400 invalid_email; email is
// required, so that a body that forgot it clears nothing.
func (s *Server) consumerNotificationsPut(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	var req wire.ConsumerNotificationsRequest
	body, err := decodeBody(w, r, maxSmallBody, false, &req)
	if err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return badRequest("invalid_json", "the request body must be a JSON object")
	}
	if _, ok := members["email"]; !ok {
		return badRequest("invalid_email", `email is required: an address such as "ops@example.com", or null or "" to clear it`)
	}
	email := ""
	if req.Email != nil {
		email = *req.Email
	}
	if email != "" {
		if err := herald.ValidateEmail(email); err != nil {
			return badRequest("invalid_email", "email: %v", err)
		}
	}
	cn, err := s.store.ConsumerNotificationsSet(r.Context(), &store.ConsumerNotificationsSetParams{
		ConsumerID: consumer, Email: email, Now: s.storeNow(),
	})
	if err != nil {
		return fmt.Errorf("set consumer notifications: %w", err)
	}
	writeJSON(w, http.StatusOK, notificationsAnswer(cn))
	return nil
}

// notificationsAnswer is the wire form of a consumer's settings.
func notificationsAnswer(cn *store.ConsumerNotifications) wire.ConsumerNotifications {
	out := wire.ConsumerNotifications{ConsumerID: cn.ConsumerID}
	if cn.Email != "" {
		email := cn.Email
		out.Email = &email
	}
	if !cn.UpdatedAt.IsZero() {
		t := cn.UpdatedAt.UTC()
		out.UpdatedAt = &t
	}
	return out
}

// consumerPath holds the path's {consumer_id} to p's consumer: another
// consumer answers 404 not_found, so a consumer key learns nothing of
// which consumers exist.
func consumerPath(r *http.Request, p auth.Principal) (*http.Request, error) {
	consumer := r.PathValue("consumer_id")
	if !p.Reaches(consumer) {
		return nil, &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no consumer has id %q", consumer)}
	}
	return r, nil
}
