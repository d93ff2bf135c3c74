package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/edge"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// Bounds of a portal link's ttl (API.md, "Portal sessions").
const (
	defaultPortalLinkTTL = 15 * time.Minute
	minPortalLinkTTL     = time.Minute
	maxPortalLinkTTL     = 24 * time.Hour
)

// portalSessionCreate serves POST /v1/consumers/{consumer_id}/portal-sessions
// (operator keys only) {"ttl": "15m"}: 201 with a one-time link to the
// portal for that consumer. The link's token is shown in this answer only;
// Herald keeps its SHA-256. The URL starts with where browsers reach
// Herald (edge.SiteOf): --public-url when set, or else the request's own
// scheme and Host (https when the call came over TLS or through a trusted
// proxy that says so).
func (s *Server) portalSessionCreate(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	var req wire.PortalSessionRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	ttl := defaultPortalLinkTTL
	if req.TTL != nil {
		d, err := time.ParseDuration(*req.TTL)
		if err != nil || d < minPortalLinkTTL || d > maxPortalLinkTTL {
			return badRequest("invalid_ttl", "ttl must be a duration from %s to %s, such as \"15m\"", "1m", "24h")
		}
		ttl = d
	}
	token, err := auth.NewPortalToken()
	if err != nil {
		return err
	}
	ps, err := s.store.PortalSessionCreate(r.Context(), &store.PortalSessionCreateParams{
		ConsumerID: consumer, LinkHash: auth.Hash(token), LinkTTL: ttl, Now: s.storeNow(),
	})
	if err != nil {
		return fmt.Errorf("create portal session: %w", err)
	}
	writeJSON(w, http.StatusCreated, wire.PortalSession{
		URL:       edge.SiteOf(r).URL("/portal/" + token),
		ExpiresAt: ps.LinkExpiresAt.UTC(),
	})
	return nil
}

// portalSessionRevoke serves DELETE
// /v1/consumers/{consumer_id}/portal-sessions (operator keys only): every
// link and session of the consumer ends at once, on every node. 200 with
// how many there were.
func (s *Server) portalSessionRevoke(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	n, err := s.store.PortalSessionRevokeConsumer(r.Context(), &store.PortalSessionRevokeConsumerParams{ConsumerID: consumer})
	if err != nil {
		return fmt.Errorf("revoke portal sessions: %w", err)
	}
	writeJSON(w, http.StatusOK, wire.PortalRevoked{Revoked: n})
	return nil
}
