package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// maxKeyNameLen bounds an API key's name.
const maxKeyNameLen = 200

// apiKeyCreate serves POST /v1/api-keys (operator keys only)
// {"name": "…", "scope": "operator"|"consumer", "consumer_id": "…"}: 201
// with the key, whose secret (key) this answer alone shows; Herald keeps
// its SHA-256 (internal/auth). consumer_id is required for a consumer key
// and refused for an operator key.
func (s *Server) apiKeyCreate(w http.ResponseWriter, r *http.Request) error {
	var req wire.APIKeyRequest
	if _, err := decodeBody(w, r, maxSmallBody, false, &req); err != nil {
		return err
	}
	k, err := apiKeyFromRequest(&req)
	if err != nil {
		return err
	}
	secret, err := auth.NewKey()
	if err != nil {
		return err
	}
	k.Hash = auth.Hash(secret)
	k.Prefix = auth.Prefix(secret)
	created, err := s.store.APIKeyCreate(r.Context(), &store.APIKeyCreateParams{Key: k, Now: s.storeNow()})
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	writeJSON(w, http.StatusCreated, createdKey(created, secret))
	return nil
}

// apiKeyFromRequest validates the body of POST /v1/api-keys.
func apiKeyFromRequest(req *wire.APIKeyRequest) (*herald.APIKey, error) {
	if req.Name == nil || strings.TrimSpace(*req.Name) == "" || len(*req.Name) > maxKeyNameLen || hasControl(*req.Name) {
		return nil, badRequest("invalid_name", "name is required: 1 to %d bytes without control characters, to say what the key is for", maxKeyNameLen)
	}
	if req.Scope == nil || !herald.Scope(*req.Scope).Valid() {
		return nil, badRequest("invalid_scope", "scope is required and must be %q (everything) or %q (one consumer's data)", herald.ScopeOperator, herald.ScopeConsumer)
	}
	k := &herald.APIKey{Name: *req.Name, Scope: herald.Scope(*req.Scope)}
	switch k.Scope {
	case herald.ScopeConsumer:
		if req.ConsumerID == nil {
			return nil, badRequest("invalid_consumer_id", "consumer_id is required for a consumer key: the one consumer it reaches")
		}
		if err := validateConsumerID(*req.ConsumerID); err != nil {
			return nil, err
		}
		k.ConsumerID = *req.ConsumerID
	case herald.ScopeOperator:
		if req.ConsumerID != nil {
			return nil, badRequest("invalid_consumer_id", "consumer_id is for consumer keys only; an operator key reaches every consumer")
		}
	}
	return k, nil
}

// apiKeyList serves GET /v1/api-keys?consumer_id=&limit=&cursor=, newest
// first, without the keys themselves.
func (s *Server) apiKeyList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "consumer_id", "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	page, err := s.store.APIKeyList(r.Context(), &store.APIKeyListParams{
		ConsumerID: q.Get("consumer_id"), Cursor: cursor, Limit: limit,
	})
	if err != nil {
		return fmt.Errorf("list api keys: %w", err)
	}
	out := wire.List[wire.APIKey]{Data: make([]wire.APIKey, 0, len(page.Items)), NextCursor: encodeCursor(page.NextCursor)}
	for _, k := range page.Items {
		out.Data = append(out.Data, toAPIKeyJSON(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiKeyGet serves GET /v1/api-keys/{id}, without the key itself.
func (s *Server) apiKeyGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	k, err := s.store.APIKeyGet(r.Context(), id)
	if err != nil {
		return storeError("get api key", err, "API key", id)
	}
	writeJSON(w, http.StatusOK, toAPIKeyJSON(k))
	return nil
}

// apiKeyRevoke serves DELETE /v1/api-keys/{id}: 204, and the key
// authenticates nothing from then on, on every node (authentication reads
// the store on every call).
func (s *Server) apiKeyRevoke(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.store.APIKeyRevoke(r.Context(), &store.APIKeyRevokeParams{ID: id, Now: s.storeNow()}); err != nil {
		return storeError("revoke api key", err, "API key", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createdKey answers POST /v1/api-keys: k with the one copy of its secret
// Herald ever shows.
func createdKey(k *herald.APIKey, secret string) wire.APIKey {
	out := toAPIKeyJSON(k)
	out.Key = secret
	return out
}
