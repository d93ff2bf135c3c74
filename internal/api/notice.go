package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/wire"
)

// A confirmation link works for ConfirmationTTL, and a new one for the
// same address is mailed at most once per ConfirmationEvery (a PUT of the
// address sooner sends nothing). Whatever the address, a consumer's
// confirmation mails are at most ConfirmationMailLimit per
// ConfirmationMailWindow, counted in the database across nodes
// (store.QuotaConfirmationMail): a PUT that would mail one more answers
// 429 too_many_mails and changes nothing, so alternating two addresses
// cannot make Herald mail strangers without end.
const (
	ConfirmationTTL        = 48 * time.Hour
	ConfirmationEvery      = 5 * time.Minute
	ConfirmationMailLimit  = 3
	ConfirmationMailWindow = time.Hour
)

// ConfirmationMailer sends a pending notice address the link that
// confirms it, outside the request: QueueConfirmation queues the mail
// without waiting (notice.Mailer, which sends it and tries again on
// failure) and reports false when it could not be queued.
type ConfirmationMailer interface {
	QueueConfirmation(c notice.Confirmation) bool
}

// What a PUT did about the confirmation of a pending address, for the
// answer's detail.
type confirmationOutcome int

const (
	confirmationNone    confirmationOutcome = iota // nothing to do, or a GET
	confirmationSent                               // a link was queued to be mailed
	confirmationTooSoon                            // one was mailed less than ConfirmationEvery ago
	confirmationFailed                             // the mail could not be queued
)

// noticeAddressGet serves GET
// /v1/consumers/{consumer_id}/notifications: the address Herald mails the
// consumer's notices to (email null when none is set) and where its
// confirmation stands.
func (s *Server) noticeAddressGet(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	cn, err := s.store.NoticeAddressGet(r.Context(), consumer)
	if err != nil {
		return fmt.Errorf("get notice address: %w", err)
	}
	writeJSON(w, http.StatusOK, s.noticeAddressAnswer(cn, confirmationNone))
	return nil
}

// noticeAddressPut serves PUT
// /v1/consumers/{consumer_id}/notifications {"email": "ops@example.com"}:
// sets the address (null or "" clears it). The address is one bare
// mailbox (herald.ValidateEmail), else 400 invalid_email; email is
// required, so that a body that forgot it clears nothing.
//
// A new address is pending: Herald mails it a confirmation link (queued:
// the answer does not wait for the mail server), and mails it notices
// only once the link was opened. A PUT of the pending address again
// resends the link, at most once per ConfirmationEvery, and a consumer's
// confirmation mails are at most ConfirmationMailLimit an hour (429
// too_many_mails with Retry-After, nothing changed). An
// operator key may pass "confirmed": true to set the address confirmed at
// once (the operator vouches for it); a consumer key may not (403
// forbidden), since confirming is what keeps a consumer from pointing
// Herald's mail at a stranger.
func (s *Server) noticeAddressPut(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	var req wire.NoticeAddressRequest
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
	confirmed := req.Confirmed != nil && *req.Confirmed
	if p, _ := auth.FromContext(r.Context()); confirmed && !p.IsOperator() {
		return forbidden("confirmed: only an operator key may set an address confirmed; " +
			"the address is confirmed by opening the link Herald mails to it")
	}
	// Whether this PUT would mail a confirmation, read before anything
	// changes, so that a consumer past its mail quota changes nothing.
	before, err := s.store.NoticeAddressGet(r.Context(), consumer)
	if err != nil {
		return fmt.Errorf("get notice address: %w", err)
	}
	mail := s.confirm != nil && email != "" && !confirmed && !(before.Email == email && (before.Confirmed() || s.sentRecently(before)))
	if mail {
		q, err := s.store.ConsumerQuotaTake(r.Context(), &store.ConsumerQuotaTakeParams{
			ConsumerID: consumer, Kind: store.QuotaConfirmationMail,
			Limit: ConfirmationMailLimit, Window: ConfirmationMailWindow, Now: s.storeNow(),
		})
		if err != nil {
			return fmt.Errorf("set notice address: %w", err)
		}
		if !q.OK {
			wait := retryAfter(w, q)
			return &apiError{http.StatusTooManyRequests, "too_many_mails", fmt.Sprintf(
				"at most %d confirmation mails an hour per consumer, whatever the address; nothing was changed; try again in %s",
				ConfirmationMailLimit, wait)}
		}
	}
	cn, err := s.store.NoticeAddressSet(r.Context(), &store.NoticeAddressSetParams{
		ConsumerID: consumer, Email: email, Confirmed: confirmed, Now: s.storeNow(),
	})
	if err != nil {
		return fmt.Errorf("set notice address: %w", err)
	}
	outcome := confirmationNone
	switch {
	case mail && cn.Email == email && !cn.Confirmed():
		cn, outcome, err = s.sendConfirmation(r.Context(), cn)
		if err != nil {
			return err
		}
	case s.confirm != nil && cn.Email != "" && !cn.Confirmed() && s.sentRecently(cn):
		outcome = confirmationTooSoon
	}
	writeJSON(w, http.StatusOK, s.noticeAddressAnswer(cn, outcome))
	return nil
}

// sentRecently reports whether cn's pending address had a link issued
// less than ConfirmationEvery ago (by this node's clock; the store's
// conditional write decides).
func (s *Server) sentRecently(cn *store.NoticeAddress) bool {
	return !cn.ConfirmationSentAt.IsZero() && s.clock.Now().Before(cn.ConfirmationSentAt.Add(ConfirmationEvery))
}

// sendConfirmation issues a confirmation token for cn's pending address
// and queues the mail of its link, unless one was issued less than
// ConfirmationEvery ago (or another node is issuing one now). A mail that
// could not be queued withdraws its token, so a retry may follow at once;
// the address stays as it is.
func (s *Server) sendConfirmation(ctx context.Context, cn *store.NoticeAddress) (*store.NoticeAddress, confirmationOutcome, error) {
	token, err := auth.NewPortalToken()
	if err != nil {
		return nil, confirmationNone, err
	}
	hash := auth.Hash(token)
	issued, ok, err := s.store.NoticeAddressIssue(ctx, &store.NoticeAddressIssueParams{
		ConsumerID: cn.ConsumerID, Email: cn.Email, TokenHash: hash,
		TTL: ConfirmationTTL, Every: ConfirmationEvery, Now: s.storeNow(),
	})
	if err != nil {
		return nil, confirmationNone, fmt.Errorf("issue confirmation: %w", err)
	}
	if !ok {
		if issued.Email != cn.Email || issued.Confirmed() {
			return issued, confirmationNone, nil // changed meanwhile
		}
		return issued, confirmationTooSoon, nil
	}
	if s.confirm.QueueConfirmation(notice.Confirmation{
		ConsumerID: cn.ConsumerID, Email: cn.Email, Token: token, TokenHash: hash, ExpiresAt: issued.ConfirmationExpiresAt,
	}) {
		return issued, confirmationSent, nil
	}
	s.log.Error("confirmation mail not queued", logkey.ConsumerID, cn.ConsumerID)
	// Not sent: withdraw the token, even if the caller went away.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.store.NoticeAddressUnissue(wctx, &store.NoticeAddressUnissueParams{
		ConsumerID: cn.ConsumerID, TokenHash: hash,
	}); err != nil {
		return nil, confirmationNone, fmt.Errorf("withdraw confirmation: %w", err)
	}
	now, err := s.store.NoticeAddressGet(wctx, cn.ConsumerID)
	if err != nil {
		return nil, confirmationNone, fmt.Errorf("get notice address: %w", err)
	}
	return now, confirmationFailed, nil
}

// noticeAddressConfirm serves POST
// /v1/consumers/{consumer_id}/notifications/confirm {"token": "…"}: the
// token of the link mailed to the pending address confirms it, once. A
// token that is not the consumer's live one (wrong, another consumer's,
// or replaced by a newer link or a change of address) answers 400
// invalid_token, an expired one 410 token_expired, one used already 409
// token_used. The token is 32 random bytes, so guessing is hopeless and
// no attempt limit is needed; only its SHA-256 is stored.
func (s *Server) noticeAddressConfirm(w http.ResponseWriter, r *http.Request) error {
	consumer := r.PathValue("consumer_id")
	if err := validateConsumerID(consumer); err != nil {
		return err
	}
	var req wire.NoticeAddressConfirmRequest
	if _, err := decodeBody(w, r, maxSmallBody, false, &req); err != nil {
		return err
	}
	if req.Token == "" {
		return badRequest("invalid_token", "token is required: the token of the confirmation link mailed to the address")
	}
	cn, err := s.store.NoticeAddressConfirm(r.Context(), &store.NoticeAddressConfirmParams{
		ConsumerID: consumer, TokenHash: auth.Hash(req.Token), Now: s.storeNow(),
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return badRequest("invalid_token", "token: not the live confirmation token of consumer %s's address "+
			"(a wrong token, or one replaced by a newer confirmation link or a change of address)", consumer)
	case errors.Is(err, store.ErrConfirmationExpired):
		return &apiError{http.StatusGone, "token_expired", "token: this confirmation link has expired; " +
			"set the address again to mail a new one"}
	case errors.Is(err, store.ErrConfirmationUsed):
		return &apiError{http.StatusConflict, "token_used", "token: this confirmation link was used already; the address is confirmed"}
	case err != nil:
		return fmt.Errorf("confirm notice address: %w", err)
	}
	writeJSON(w, http.StatusOK, s.noticeAddressAnswer(cn, confirmationNone))
	return nil
}

// noticeAddressAnswer is the wire form of a consumer's settings, with a
// sentence on where the address stands after outcome.
func (s *Server) noticeAddressAnswer(cn *store.NoticeAddress, outcome confirmationOutcome) wire.NoticeAddress {
	out := wire.NoticeAddress{ConsumerID: cn.ConsumerID, MailEnabled: s.confirm != nil}
	out.UpdatedAt = timeOrNull(cn.UpdatedAt)
	if cn.Email != "" {
		email := cn.Email
		out.Email = &email
		status := wire.NoticeAddressPending
		if cn.Confirmed() {
			status = wire.NoticeAddressConfirmed
			out.ConfirmedAt = timeOrNull(cn.ConfirmedAt)
		}
		out.Status = &status
		out.ConfirmationSentAt = timeOrNull(cn.ConfirmationSentAt)
		out.ConfirmationExpiresAt = timeOrNull(cn.ConfirmationExpiresAt)
	}
	out.Detail = s.noticeAddressDetail(cn, outcome)
	return out
}

// timeOrNull is t in UTC, or null for the zero time.
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// noticeAddressDetail says in a sentence where cn's address stands.
func (s *Server) noticeAddressDetail(cn *store.NoticeAddress, outcome confirmationOutcome) string {
	const layout = "2006-01-02 15:04 UTC"
	switch {
	case cn.Email == "":
		return "No address is set: no notices are mailed."
	case cn.Confirmed() && s.confirm == nil:
		return "The address is confirmed, but mail is not configured on this server (--smtp-url): no notices are mailed."
	case cn.Confirmed():
		return "The address is confirmed: notices are mailed to " + cn.Email + "."
	case s.confirm == nil:
		return "Mail is not configured on this server (--smtp-url), so no confirmation can be sent and nothing is mailed. " +
			"The address is kept: set it again once mail is configured to send its confirmation."
	case outcome == confirmationFailed:
		return "The confirmation mail could not be sent just now; set the address again to retry. Nothing is mailed until it is confirmed."
	case outcome == confirmationSent:
		return "A confirmation link is being mailed to " + cn.Email + "; notices are mailed there once it is opened (it works until " +
			cn.ConfirmationExpiresAt.UTC().Format(layout) + ")."
	case outcome == confirmationTooSoon:
		return "A confirmation link was mailed to " + cn.Email + " at " + cn.ConfirmationSentAt.UTC().Format(layout) +
			"; another can be sent from " + cn.ConfirmationSentAt.Add(ConfirmationEvery).UTC().Format(layout) + " (set the address again)."
	case cn.ConfirmationSentAt.IsZero():
		return "Waiting for confirmation: no link was mailed yet; set the address again to send one."
	case !cn.ConfirmationExpiresAt.After(s.clock.Now()):
		return "The confirmation link mailed at " + cn.ConfirmationSentAt.UTC().Format(layout) +
			" has expired; set the address again to mail a new one."
	}
	return "Waiting for confirmation: nothing is mailed to " + cn.Email + " until the link mailed to it at " +
		cn.ConfirmationSentAt.UTC().Format(layout) + " is opened. Set the address again to mail another (at most one every 5 minutes)."
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
