package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// RotatedSecretValidFor is how long the old secret keeps signing after a
// rotation, so receivers can switch without dropping a webhook.
const RotatedSecretValidFor = 24 * time.Hour

// endpointCreate serves POST /v1/endpoints. Only url is required; every
// other setting takes its default when absent or null.
func (s *Server) endpointCreate(w http.ResponseWriter, r *http.Request) error {
	var req wire.EndpointRequest
	present, err := decodeEndpointRequest(w, r, &req)
	if err != nil {
		return err
	}
	ep := &herald.Endpoint{
		ConsumerID:      herald.DefaultConsumerID,
		EventTypes:      []string{"*"},
		Enabled:         true,
		Timeout:         herald.DefaultTimeout,
		MaxInFlight:     herald.DefaultMaxInFlight,
		SignatureScheme: herald.SchemeStandard,
	}
	if err := s.applyEndpoint(ep, &req, present, true); err != nil {
		return err
	}
	if err := s.checkEndpointRoom(r, ep.ConsumerID); err != nil {
		return err
	}
	created, err := s.store.EndpointCreate(r.Context(), &store.EndpointCreateParams{Endpoint: ep, Now: s.storeNow()})
	if err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	writeJSON(w, http.StatusCreated, s.endpointAnswer(created))
	return nil
}

// endpointList serves
// GET /v1/endpoints?consumer_id=&sort=&include=health&limit=&cursor=.
// sort is one of store.EndpointSorts (default -created, newest first):
// by a column, an index's order, so a page costs one index range; or by
// health, due or dead, the endpoints that need attention first, so a page
// costs what needs attention (store.EndpointSort). With include=health
// each endpoint's health carries the figures GET one endpoint gives (the
// last hour's attempts and success rate, in flight, due, dead, score),
// read for the page's endpoints alone in one store call, at the time the
// page was ranked at.
func (s *Server) endpointList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "consumer_id", "sort", "include", "limit", "cursor"); err != nil {
		return err
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		return err
	}
	sort := store.EndpointSort(q.Get("sort"))
	if !sort.Valid() {
		names := make([]string, 0, len(store.EndpointSorts()))
		for _, v := range store.EndpointSorts() {
			names = append(names, string(v))
		}
		return badRequest("invalid_sort", "sort must be one of %s", strings.Join(names, ", "))
	}
	var health bool
	for _, v := range q["include"] {
		for part := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(part) {
			case "health":
				health = true
			default:
				return badRequest("invalid_include", "include takes health")
			}
		}
	}
	now := s.storeNow()
	page, err := s.store.EndpointList(r.Context(), &store.EndpointListParams{
		ConsumerID: q.Get("consumer_id"), Sort: sort, Cursor: cursor, Limit: limit, Now: now,
	})
	if errors.Is(err, store.ErrInvalidCursor) {
		return badRequest("invalid_cursor", "cursor must be a next_cursor value from an earlier page of this list, with the same sort")
	}
	if err != nil {
		return fmt.Errorf("list endpoints: %w", err)
	}
	var figures map[string]*herald.EndpointHealth
	if health && len(page.Items) > 0 {
		ids := make([]string, len(page.Items))
		for i, ep := range page.Items {
			ids[i] = ep.ID
		}
		if figures, err = s.store.EndpointFigures(r.Context(), &store.EndpointFiguresParams{IDs: ids, Now: now}); err != nil {
			return fmt.Errorf("list endpoints: %w", err)
		}
	}
	out := wire.List[wire.Endpoint]{Data: make([]wire.Endpoint, 0, len(page.Items)), NextCursor: encodeCursor(page.NextCursor)}
	for _, ep := range page.Items {
		if h, ok := figures[ep.ID]; ok {
			ep.Health = *h
		}
		a := s.endpointAnswer(ep)
		// An endpoint deleted between the list and the figures has none.
		if h, ok := figures[ep.ID]; ok {
			withFigures(&a, ep.Enabled, h)
		}
		out.Data = append(out.Data, a)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// endpointGet serves GET /v1/endpoints/{id}. Its health comes with the
// last hour's success rate and attempt count, its queue (in flight, due,
// dead) and its score, which only this answer and a list with
// include=health carry (they cost a look at the attempts and the queue).
func (s *Server) endpointGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ep, err := s.getEndpoint(r, id)
	if err != nil {
		return err
	}
	figures, err := s.store.EndpointFigures(r.Context(), &store.EndpointFiguresParams{IDs: []string{id}, Now: s.storeNow()})
	if err != nil {
		return fmt.Errorf("get endpoint figures: %w", err)
	}
	h, ok := figures[id]
	if !ok {
		return storeError("get endpoint figures", store.ErrNotFound, "endpoint", id)
	}
	ep.Health = *h
	out := s.endpointAnswer(ep)
	withFigures(&out, ep.Enabled, h)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getEndpoint(r *http.Request, id string) (*herald.Endpoint, error) {
	ep, err := s.store.EndpointGet(r.Context(), id)
	if err != nil {
		return nil, storeError("get endpoint", err, "endpoint", id)
	}
	return ep, nil
}

// endpointUpdate serves PATCH /v1/endpoints/{id}: only the fields present
// change, each validated as on create; a field set to null returns to its
// default. consumer_id and secret cannot change here.
func (s *Server) endpointUpdate(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.EndpointRequest
	present, err := decodeEndpointRequest(w, r, &req)
	if err != nil {
		return err
	}
	ep, err := s.getEndpoint(r, id)
	if err != nil {
		return err
	}
	if err := s.applyEndpoint(ep, &req, present, false); err != nil {
		return err
	}
	updated, err := s.store.EndpointUpdate(r.Context(), &store.EndpointUpdateParams{Endpoint: ep, Now: s.storeNow()})
	if err != nil {
		return storeError("update endpoint", err, "endpoint", id)
	}
	writeJSON(w, http.StatusOK, s.endpointAnswer(updated))
	return nil
}

// endpointDelete serves DELETE /v1/endpoints/{id}: 204; its live
// deliveries are cancelled, its history stays.
func (s *Server) endpointDelete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := s.store.EndpointDelete(r.Context(), &store.EndpointDeleteParams{ID: id, Now: s.storeNow()})
	if err != nil {
		return storeError("delete endpoint", err, "endpoint", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// endpointRotateSecret serves POST /v1/endpoints/{id}/rotate-secret with an
// optional body {"secret": "…"}; without one a secret is made. The old
// secret keeps signing for RotatedSecretValidFor.
func (s *Server) endpointRotateSecret(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.RotateSecretRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	ep, err := s.getEndpoint(r, id)
	if err != nil {
		return err
	}
	secret, err := endpointSecret(req.Secret, ep.SignatureScheme)
	if err != nil {
		return err
	}
	rotated, err := s.store.EndpointRotateSecret(r.Context(), &store.EndpointRotateSecretParams{
		ID: id, NewSecret: secret, PreviousValidFor: RotatedSecretValidFor, Now: s.storeNow(),
	})
	if err != nil {
		return storeError("rotate endpoint secret", err, "endpoint", id)
	}
	writeJSON(w, http.StatusOK, s.endpointAnswer(rotated))
	return nil
}

// endpointEnable serves POST /v1/endpoints/{id}/enable.
func (s *Server) endpointEnable(w http.ResponseWriter, r *http.Request) error {
	var req wire.EmptyRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	return s.setEnabled(w, r, true, "")
}

// endpointDisable serves POST /v1/endpoints/{id}/disable with an optional
// body {"reason": "…"}. Its live deliveries go dead (endpoint_disabled) and
// can be replayed once it is enabled again.
func (s *Server) endpointDisable(w http.ResponseWriter, r *http.Request) error {
	var req wire.DisableRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	reason := ""
	if req.Reason != nil {
		reason = *req.Reason
		if len(reason) > maxReasonLen || hasControl(reason) || hasControlText(reason) {
			return badRequest("invalid_reason", "reason must be at most %d bytes without control characters", maxReasonLen)
		}
	}
	notify := s.notify != nil
	var before *herald.Endpoint
	if p, ok := auth.FromContext(r.Context()); notify && ok && p.IsOperator() {
		// Only a change of an operator's is told: a consumer knows what
		// it disabled itself.
		ep, err := s.store.EndpointGet(r.Context(), r.PathValue("id"))
		if err == nil && ep.Enabled {
			before = ep
		}
	}
	if err := s.setEnabled(w, r, false, reason); err != nil || before == nil {
		return err
	}
	if reason == "" {
		reason = "disabled by the operator"
	} else {
		reason = "disabled by the operator: " + reason
	}
	s.notify(herald.NewNotification(before.ConsumerID, herald.NotifyEndpointDisabled, herald.EndpointDisabledPayload{
		EndpointID: before.ID,
		ConsumerID: before.ConsumerID,
		URL:        before.URL,
		Reason:     reason,
		DisabledAt: s.clock.Now().UTC(),
	}))
	return nil
}

func (s *Server) setEnabled(w http.ResponseWriter, r *http.Request, enabled bool, reason string) error {
	id := r.PathValue("id")
	ep, err := s.store.EndpointSetEnabled(r.Context(), &store.EndpointSetEnabledParams{
		ID: id, Enabled: enabled, Reason: reason, Now: s.storeNow(),
	})
	if err != nil {
		return storeError("set endpoint enabled", err, "endpoint", id)
	}
	writeJSON(w, http.StatusOK, s.endpointAnswer(ep))
	return nil
}

// endpointReplay serves POST /v1/endpoints/{id}/replay with
// {"status": "dead", "since": "…", "until": "…", "dry_run": false,
// "rate": 50} (all optional; status defaults to dead, since and until
// bound the deliveries' creation, until exclusive; dry_run only counts;
// rate paces the replay in deliveries per second) and answers
// {"replayed": N, "dry_run": false}. A disabled endpoint is a 409, dry run
// or not: its deliveries would only go dead again.
func (s *Server) endpointReplay(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req wire.EndpointReplayRequest
	if _, err := decodeBody(w, r, maxSmallBody, true, &req); err != nil {
		return err
	}
	status := herald.StatusDead
	if req.Status != nil {
		var err error
		if status, err = replayStatus(*req.Status); err != nil {
			return err
		}
	}
	var since, until time.Time
	var err error
	if req.Since != nil {
		if since, err = parseTime("since", *req.Since); err != nil {
			return err
		}
	}
	if req.Until != nil {
		if until, err = parseTime("until", *req.Until); err != nil {
			return err
		}
	}
	if err := timeRange(since, until); err != nil {
		return err
	}
	dryRun, rate, err := parseReplayOptions(&req.ReplayOptions)
	if err != nil {
		return err
	}
	ep, err := s.getEndpoint(r, id)
	if err != nil {
		return err
	}
	if !ep.Enabled {
		return &apiError{http.StatusConflict, "conflict",
			fmt.Sprintf("endpoint %s is disabled; enable it (POST /v1/endpoints/%s/enable) before replaying its deliveries", id, id)}
	}
	n, err := s.store.DeliveryReplayMany(r.Context(), &store.DeliveryReplayManyParams{
		EndpointID: id, Status: status, Since: since, Until: until,
		Rate: rate, DryRun: dryRun, Now: s.storeNow(),
	})
	if err != nil {
		return storeError("replay endpoint deliveries", err, "endpoint", id)
	}
	writeJSON(w, http.StatusOK, wire.ReplayResult{Replayed: n, DryRun: dryRun})
	return nil
}

// replayStatus checks a status to replay: a terminal one.
func replayStatus(v string) (herald.Status, error) {
	st := herald.Status(v)
	if !st.Terminal() {
		return "", badRequest("invalid_status", "status must be dead, delivered or cancelled (the terminal statuses a replay can bring back)")
	}
	return st, nil
}

// readOnlyField says whether a PATCH cannot set the endpoint field key, and
// what to do instead.
func readOnlyField(key string) (string, bool) {
	switch key {
	case "id":
		return "it is made by Herald", true
	case "consumer_id":
		return "an endpoint stays with its consumer; create a new endpoint instead", true
	case "secret", "public_key", "previous_public_key":
		return "use POST /v1/endpoints/{id}/rotate-secret", true
	case "previous_secret_expires_at":
		return "it is set by POST /v1/endpoints/{id}/rotate-secret", true
	case "enabled":
		return "use POST /v1/endpoints/{id}/enable or /disable", true
	case "disabled_reason":
		return "use POST /v1/endpoints/{id}/disable", true
	case "health":
		return "it is kept by Herald from the endpoint's answers", true
	case "created_at", "updated_at":
		return "it is set by Herald", true
	}
	return "", false
}

// decodeEndpointRequest decodes an endpoint's settings strictly into req and
// also returns the body's top-level keys, so that PATCH can tell a field set
// to null (back to its default) from one left out.
func decodeEndpointRequest(w http.ResponseWriter, r *http.Request, req *wire.EndpointRequest) (map[string]json.RawMessage, error) {
	body, err := readBody(w, r, maxSmallBody, "body_too_large")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	var present map[string]json.RawMessage
	if err := decodeJSON(body, &present); err != nil {
		return nil, err
	}
	if r.Method == http.MethodPatch {
		for key := range present {
			if why, ok := readOnlyField(key); ok {
				return nil, badRequest("read_only_field", "%s cannot be changed with PATCH: %s", key, why)
			}
		}
	}
	if err := decodeJSONDurations(body, req, func(field string) error {
		return endpointDurationError(field, present)
	}); err != nil {
		return nil, err
	}
	return present, nil
}

// endpointDurationError answers a duration of an endpoint request that is
// not a Go duration string, field being its JSON path, as the field's own
// range check answers (the messages do not quote the value). For
// retry_schedule it names the index of the first such delay.
func endpointDurationError(field string, present map[string]json.RawMessage) error {
	switch field {
	case "timeout":
		return errTimeout()
	case "auto_disable_after":
		return errAutoDisableAfter()
	case "retry_policy.base":
		return errRetryPolicyBase()
	case "retry_policy.cap":
		return errRetryPolicyCap()
	case "retry_schedule":
		var items []json.RawMessage
		if err := json.Unmarshal(present["retry_schedule"], &items); err == nil {
			if err := retryScheduleLength(len(items)); err != nil {
				return err
			}
			for i, item := range items {
				var d wire.Duration
				if d.UnmarshalJSON(item) != nil {
					return errRetryScheduleItem(i)
				}
			}
		}
		return errRetryScheduleItem(0)
	}
	return badRequest("invalid_type", "%s must be a Go duration string such as \"30s\"", field)
}

// applyEndpoint validates the request's fields and sets them on ep. A field
// present as null returns to its default. creating is false for PATCH.
func (s *Server) applyEndpoint(ep *herald.Endpoint, req *wire.EndpointRequest, present map[string]json.RawMessage, creating bool) error {
	_, has := present["url"]
	isNull := func(key string) bool {
		raw, ok := present[key]
		return ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
	}
	if creating && (!has || req.URL == nil) || !creating && isNull("url") {
		return badRequest("invalid_url", "url is required")
	}

	if creating && req.ConsumerID != nil {
		if err := validateConsumerID(*req.ConsumerID); err != nil {
			return err
		}
		ep.ConsumerID = *req.ConsumerID
	}
	if req.URL != nil {
		if err := s.validateURL(*req.URL); err != nil {
			return err
		}
		ep.URL = *req.URL
	}
	if isNull("description") {
		ep.Description = ""
	} else if req.Description != nil {
		// A NUL byte is refused as no text column holds it (PostgreSQL
		// answered it with an error, a 500).
		if len(*req.Description) > maxDescriptionLen || hasControlText(*req.Description) {
			return badRequest("invalid_description", "description must be at most %d bytes, without control characters (tabs and line breaks are kept)", maxDescriptionLen)
		}
		ep.Description = *req.Description
	}
	if isNull("event_types") {
		ep.EventTypes = []string{"*"}
	} else if req.EventTypes != nil {
		if err := validateEventTypes(req.EventTypes); err != nil {
			return err
		}
		ep.EventTypes = req.EventTypes
	}
	if err := applyFilter(ep, req, isNull); err != nil {
		return err
	}
	schemeChanged, oldScheme := false, ep.SignatureScheme
	if isNull("signature_scheme") {
		schemeChanged = ep.SignatureScheme != herald.SchemeStandard
		ep.SignatureScheme = herald.SchemeStandard
	} else if req.SignatureScheme != nil {
		scheme := herald.SignatureScheme(*req.SignatureScheme)
		if !scheme.Valid() {
			return badRequest("invalid_signature_scheme", "signature_scheme must be %q, %q or %q", herald.SchemeStandard, herald.SchemeHMACSHA256, herald.SchemeEd25519)
		}
		schemeChanged = ep.SignatureScheme != scheme
		ep.SignatureScheme = scheme
	}
	if isNull("timeout") {
		ep.Timeout = herald.DefaultTimeout
	} else if req.Timeout != nil {
		d := time.Duration(*req.Timeout)
		if d < minTimeout || d > herald.MaxTimeout {
			return errTimeout()
		}
		ep.Timeout = d
	}
	if err := applyRetry(ep, req, isNull); err != nil {
		return err
	}
	if isNull("retry_client_errors") {
		ep.RetryClientErrors = false
	} else if req.RetryClientErrors != nil {
		ep.RetryClientErrors = *req.RetryClientErrors
	}
	if isNull("rate_limit") {
		ep.RateLimit = nil
	} else if req.RateLimit != nil {
		rl := req.RateLimit
		if !(rl.PerSecond > 0) {
			return badRequest("invalid_rate_limit", "rate_limit.per_second must be a number above 0")
		}
		if rl.Burst < 1 {
			return badRequest("invalid_rate_limit", "rate_limit.burst must be an integer of at least 1")
		}
		ep.RateLimit = &herald.RateLimit{PerSecond: rl.PerSecond, Burst: rl.Burst}
	}
	if isNull("max_in_flight") {
		ep.MaxInFlight = herald.DefaultMaxInFlight
	} else if req.MaxInFlight != nil {
		if *req.MaxInFlight < 1 || *req.MaxInFlight > maxMaxInFlight {
			return badRequest("invalid_max_in_flight", "max_in_flight must be an integer from 1 to %d", maxMaxInFlight)
		}
		ep.MaxInFlight = *req.MaxInFlight
	}
	if isNull("headers") {
		ep.Headers = nil
	} else if req.Headers != nil {
		if err := validateHeaders(req.Headers); err != nil {
			return err
		}
		ep.Headers = req.Headers
	}
	if err := applyProtection(ep, req, isNull); err != nil {
		return err
	}
	applyTracePropagation(ep, req, isNull)
	if err := s.applyClientCertificate(ep, req, isNull); err != nil {
		return err
	}

	if creating {
		secret, err := endpointSecret(req.Secret, ep.SignatureScheme)
		if err != nil {
			return err
		}
		ep.Secret = secret
	} else if schemeChanged {
		if err := schemeChangeError(oldScheme, ep.SignatureScheme); err != nil {
			return err
		}
		if err := validateSecret(ep.Secret, ep.SignatureScheme); err != nil {
			return badRequest("invalid_signature_scheme",
				"signature_scheme %q does not fit the endpoint's current secret; rotate to a secret that fits first (POST /v1/endpoints/%s/rotate-secret)",
				ep.SignatureScheme, ep.ID)
		}
	}
	return nil
}

// applyProtection sets the ordering and the auto-disable rules. A null
// auto-disable setting is kept as zero, which the dispatcher and the
// store read as the default, so an endpoint left at the default follows
// it should it change.
func applyProtection(ep *herald.Endpoint, req *wire.EndpointRequest, isNull func(string) bool) error {
	if isNull("ordering") {
		ep.Ordering = herald.OrderingNone
	} else if req.Ordering != nil {
		o, err := parseOrdering(*req.Ordering)
		if err != nil {
			return err
		}
		ep.Ordering = o
	}
	if isNull("auto_disable_after_failures") {
		ep.AutoDisableAfterFailures = 0
	} else if req.AutoDisableAfterFailures != nil {
		if err := validateAutoDisableAfterFailures(*req.AutoDisableAfterFailures); err != nil {
			return err
		}
		ep.AutoDisableAfterFailures = *req.AutoDisableAfterFailures
	}
	if isNull("auto_disable_after") {
		ep.AutoDisableAfter = 0
	} else if req.AutoDisableAfter != nil {
		d := time.Duration(*req.AutoDisableAfter)
		if err := validateAutoDisableAfter(d); err != nil {
			return err
		}
		ep.AutoDisableAfter = d
	}
	return nil
}

// applyRetry sets the retry schedule or the exponential policy; setting one
// clears the other, since only one applies.
func applyRetry(ep *herald.Endpoint, req *wire.EndpointRequest, isNull func(string) bool) error {
	if req.RetrySchedule != nil && req.RetryPolicy != nil {
		return badRequest("invalid_retry_policy", "give retry_schedule or retry_policy, not both")
	}
	if isNull("retry_schedule") {
		ep.RetrySchedule = nil
	} else if req.RetrySchedule != nil {
		sched := req.RetrySchedule
		if err := retryScheduleLength(len(sched)); err != nil {
			return err
		}
		ds := make([]time.Duration, len(sched))
		for i, v := range sched {
			d := time.Duration(v)
			if d < 0 || d > maxRetryDelay {
				return errRetryScheduleItem(i)
			}
			ds[i] = d
		}
		ep.RetrySchedule = ds
		ep.RetryExponential = nil
	}
	if isNull("retry_policy") {
		ep.RetryExponential = nil
	} else if req.RetryPolicy != nil {
		p, err := validateRetryPolicy(req.RetryPolicy)
		if err != nil {
			return err
		}
		ep.RetryExponential = p
		ep.RetrySchedule = nil
	}
	return nil
}

// checkEndpointRoom refuses a consumer's call (its key, its portal
// session) that would create an endpoint for a consumer that has
// MaxEndpointsPerConsumer already: 409 too_many_endpoints. It counts
// before the create, so calls at the same moment may pass it together,
// each seeing the room one leaves. Operator keys are not held to it.
func (s *Server) checkEndpointRoom(r *http.Request, consumer string) error {
	most := s.maxEndpoints
	if most <= 0 || !asConsumer(r) {
		return nil
	}
	page, err := s.store.EndpointList(r.Context(), &store.EndpointListParams{ConsumerID: consumer, Limit: min(most, store.MaxListLimit)})
	if err != nil {
		return fmt.Errorf("count the consumer's endpoints: %w", err)
	}
	n := len(page.Items)
	for cursor := page.NextCursor; cursor != "" && n < most; {
		more, err := s.store.EndpointList(r.Context(), &store.EndpointListParams{ConsumerID: consumer, Cursor: cursor, Limit: min(most-n, store.MaxListLimit)})
		if err != nil {
			return fmt.Errorf("count the consumer's endpoints: %w", err)
		}
		n += len(more.Items)
		cursor = more.NextCursor
	}
	if n >= most {
		return &apiError{http.StatusConflict, "too_many_endpoints",
			fmt.Sprintf("consumer %s has %d endpoints, the most its own key or portal may make; delete one first, or ask the operator", consumer, most)}
	}
	return nil
}

// maxClientCertificateLen bounds a client certificate's PEM (a chain of a
// few certificates) and its key's.
const maxClientCertificateLen = 64 << 10

// applyClientCertificate sets or clears the endpoint's client certificate
// and key: given together and checked (both PEM, the key the
// certificate's, the certificate not expired), or null (either one) to
// clear both. Errors are 400 invalid_client_certificate and never quote
// the key.
func (s *Server) applyClientCertificate(ep *herald.Endpoint, req *wire.EndpointRequest, isNull func(string) bool) error {
	if isNull("client_certificate") || isNull("client_key") {
		if req.ClientCertificate != nil || req.ClientKey != nil {
			return badRequest("invalid_client_certificate", "client_certificate and client_key are set together, or both cleared with null")
		}
		ep.ClientCertificate, ep.ClientKey = "", ""
		return nil
	}
	if req.ClientCertificate == nil && req.ClientKey == nil {
		return nil
	}
	cert, key := "", ""
	if req.ClientCertificate != nil {
		cert = *req.ClientCertificate
	}
	if req.ClientKey != nil {
		key = *req.ClientKey
	}
	if len(cert) > maxClientCertificateLen || len(key) > maxClientCertificateLen {
		return badRequest("invalid_client_certificate", "client_certificate and client_key must each be at most %d bytes of PEM", maxClientCertificateLen)
	}
	if _, err := sender.CheckClientCertificate(cert, key, s.clock.Now()); err != nil {
		return badRequest("invalid_client_certificate", "client_certificate refused: %s", err.Error())
	}
	ep.ClientCertificate, ep.ClientKey = cert, key
	return nil
}
