package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/wire"
)

// The consumer's settings page: the address Herald mails when an endpoint
// of theirs is failing or disabled, or a delivery dies (GET and PUT
// /v1/consumers/{consumer_id}/notifications, as the signed-in consumer),
// where its confirmation stands, and a way to mail the confirmation link
// again. The confirmation page itself (/portal/confirm,
// templates/portal_confirm.html) needs no session.

// settingsPage is what templates/portal_settings.html shows.
type settingsPage struct {
	Email     string
	UpdatedAt string
	// Status is pending or confirmed for the stored address, empty
	// without one (or while Error shows what was typed).
	Status      string
	ConfirmedAt string
	// SentAt and ExpiresAt tell of the live confirmation link.
	SentAt, ExpiresAt string
	// MailEnabled is false when the server sends no mail (--smtp-url).
	MailEnabled bool
	// Detail is the API's sentence on where the address stands.
	Detail string
	// Error is the API's reason a save was refused; Email then holds what
	// was typed.
	Error string
}

// noticeAddressPath is the /v1 path of s's consumer's settings.
func noticeAddressPath(s *auth.Session) string {
	return "/v1/consumers/" + url.PathEscape(s.ConsumerID) + "/notifications"
}

// pageTime writes an answer's time for a page.
func pageTime(t interface{ Format(string) string }) string {
	return t.Format("2006-01-02 15:04 UTC")
}

// settings serves GET /portal/settings.
func (p *Portal) settings(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var cn wire.NoticeAddress
	if err := p.call(r.Context(), s, http.MethodGet, noticeAddressPath(s), nil, &cn); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	pg := settingsPage{MailEnabled: cn.MailEnabled, Detail: cn.Detail}
	if cn.Email != nil {
		pg.Email = *cn.Email
	}
	if cn.Status != nil {
		pg.Status = *cn.Status
	}
	if cn.UpdatedAt != nil {
		pg.UpdatedAt = pageTime(cn.UpdatedAt.UTC())
	}
	if cn.ConfirmedAt != nil {
		pg.ConfirmedAt = pageTime(cn.ConfirmedAt.UTC())
	}
	if cn.ConfirmationSentAt != nil {
		pg.SentAt = pageTime(cn.ConfirmationSentAt.UTC())
	}
	if cn.ConfirmationExpiresAt != nil {
		pg.ExpiresAt = pageTime(cn.ConfirmationExpiresAt.UTC())
	}
	p.render(w, r, s, http.StatusOK, "portal_settings", "Settings", "settings", pg)
}

// settingsSave serves POST /portal/settings: the form's address (empty
// clears it) goes to PUT /v1/consumers/{consumer_id}/notifications; a
// refused address shows the form again with the API's reason. The flash
// repeats the API's word on the confirmation (a link mailed, mail not
// configured).
func (p *Portal) settingsSave(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	var cn wire.NoticeAddress
	if err := p.call(r.Context(), s, http.MethodPut, noticeAddressPath(s), wire.NoticeAddressRequest{Email: &email}, &cn); err != nil {
		if !isRefusal(err) {
			p.callFailed(w, r, s, err)
			return
		}
		p.render(w, r, s, http.StatusBadRequest, "portal_settings", "Settings", "settings",
			settingsPage{Email: email, Error: callMessage(err)})
		return
	}
	text := "Saved: no notices will be mailed."
	if email != "" {
		text = "Saved. " + cn.Detail
	}
	p.redirect(w, r, "/portal/settings", Flash{Kind: "ok", Text: text})
}

// settingsResend serves POST /portal/settings/resend: the stored address,
// set again, is mailed a new confirmation link (the API sends at most one
// every few minutes and says when the next may go).
func (p *Portal) settingsResend(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	var cn wire.NoticeAddress
	if err := p.call(r.Context(), s, http.MethodGet, noticeAddressPath(s), nil, &cn); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	if cn.Email == nil || cn.Status == nil || *cn.Status != wire.NoticeAddressPending {
		p.redirect(w, r, "/portal/settings", Flash{Kind: "info", Text: "There is no address waiting for confirmation."})
		return
	}
	if err := p.call(r.Context(), s, http.MethodPut, noticeAddressPath(s), wire.NoticeAddressRequest{Email: cn.Email}, &cn); err != nil {
		p.callFailed(w, r, s, err)
		return
	}
	p.redirect(w, r, "/portal/settings", Flash{Kind: "info", Text: cn.Detail})
}

// confirmPage is what templates/portal_confirm.html shows.
type confirmPage struct {
	Consumer, Token string
	// CSRF is the form's token, made from the confirmation token (there
	// is no session).
	CSRF string
}

// confirmPage serves GET /portal/confirm?consumer=…&token=…, the link
// mailed to a pending address: a page with a Confirm button, which
// changes nothing by itself, so that mail scanners and link previews
// that fetch the link confirm nothing. No session is needed: the token is
// the proof that whoever opens it reads the mailbox.
func (p *Portal) confirmPage(w http.ResponseWriter, r *http.Request) {
	consumer, token := r.URL.Query().Get("consumer"), r.URL.Query().Get("token")
	if consumer == "" || token == "" {
		p.message(w, r, nil, http.StatusNotFound, "Link not valid",
			"This confirmation link is incomplete. Open the link from the mail as it is, or set the address again to get a new one.")
		return
	}
	p.render(w, r, nil, http.StatusOK, "portal_confirm", "Confirm your address", "",
		confirmPage{Consumer: consumer, Token: token, CSRF: auth.CSRFToken(token)})
}

// confirmPost serves POST /portal/confirm, the Confirm button: the token
// goes to POST /v1/consumers/{consumer_id}/notifications/confirm, made as
// that consumer (the token, not a session, is what lets it through: the
// call does nothing without the consumer's live token). The form must come
// from this site and carry the token's CSRF value (auth.CheckCSRF).
func (p *Portal) confirmPost(w http.ResponseWriter, r *http.Request) {
	consumer, token := r.PostFormValue("consumer"), r.PostFormValue("token")
	if consumer == "" || token == "" {
		p.message(w, r, nil, http.StatusBadRequest, "Link not valid", "This confirmation is incomplete. Open the link from the mail again.")
		return
	}
	if reason := auth.CheckCSRF(r, &auth.Session{CSRF: auth.CSRFToken(token)}); reason != "" {
		p.message(w, r, nil, http.StatusForbidden, "Not allowed", reason)
		return
	}
	var cn wire.NoticeAddress
	path := "/v1/consumers/" + url.PathEscape(consumer) + "/notifications/confirm"
	err := p.api.Call(r.Context(), auth.Consumer(consumer, ""), http.MethodPost, path, wire.NoticeAddressConfirmRequest{Token: token}, &cn)
	var ce *api.CallError
	switch {
	case err == nil:
		email := ""
		if cn.Email != nil {
			email = *cn.Email
		}
		p.message(w, r, nil, http.StatusOK, "Address confirmed",
			"Confirmed: Herald mails notices about the endpoints of consumer "+consumer+" to "+email+".")
	case errors.As(err, &ce) && ce.Code == "token_used":
		p.message(w, r, nil, http.StatusOK, "Address confirmed", "This address was confirmed already: notices are mailed to it.")
	case errors.As(err, &ce) && ce.Code == "token_expired":
		p.message(w, r, nil, http.StatusGone, "Link expired",
			"This confirmation link has expired. Set the address again in the portal's settings to get a new one.")
	case errors.As(err, &ce) && ce.Status < 500:
		p.message(w, r, nil, http.StatusNotFound, "Link not valid",
			"This confirmation link is not valid: a newer link was mailed, or the address was changed. Use the newest link, or set the address again.")
	default:
		p.log.Error("could not confirm a notice address", logkey.ConsumerID, consumer, logkey.Error, err)
		p.message(w, r, nil, http.StatusInternalServerError, "Try again", "The portal could not confirm the address just now. Try again shortly.")
	}
}
