package web

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/wire"
)

// clientCertView is an endpoint's client certificate as the pages show it.
type clientCertView struct {
	Subject, Expires string
}

// describeClientCert reads the leaf of ep's client certificate; nil when
// it has none. The pages template it as clientCert.
func describeClientCert(ep wire.Endpoint) *clientCertView {
	if ep.ClientCertificate == "" {
		return nil
	}
	v := &clientCertView{Subject: "(unreadable)", Expires: "—"}
	if ep.ClientCertificateExpiresAt != nil {
		v.Expires = ep.ClientCertificateExpiresAt.UTC().Format("2006-01-02 15:04:05")
	}
	if block, _ := pem.Decode([]byte(ep.ClientCertificate)); block != nil {
		if leaf, err := x509.ParseCertificate(block.Bytes); err == nil {
			v.Subject = leaf.Subject.String()
		}
	}
	return v
}

// clearClientCert is the PATCH body that removes a client certificate and
// its key.
type clearClientCert struct {
	ClientCertificate *string `json:"client_certificate"`
}

// clientCertBody is the PATCH body of the client certificate form: the
// pasted certificate and key (the API checks them), or, for the Remove
// button, null.
func clientCertBody(r *http.Request) (body any, done string) {
	if r.PostFormValue("action") == "clear" {
		return clearClientCert{}, "Client certificate removed."
	}
	// A textarea sends its lines ended by CRLF; PEM is kept with LF.
	pemOf := func(field string) string {
		return strings.ReplaceAll(strings.TrimSpace(r.PostFormValue(field)), "\r\n", "\n") + "\n"
	}
	cert, key := pemOf("client_certificate"), pemOf("client_key")
	return wire.EndpointRequest{ClientCertificate: &cert, ClientKey: &key},
		"Client certificate saved: receivers that ask for one get it."
}

// endpointClientCert serves POST /portal/endpoints/{id}/client-certificate:
// PATCH /v1/endpoints/{id} with a new certificate and key, or none.
func (p *Portal) endpointClientCert(w http.ResponseWriter, r *http.Request, s *auth.Session) {
	page := "/portal/endpoints/" + url.PathEscape(r.PathValue("id"))
	body, done := clientCertBody(r)
	if err := p.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+url.PathEscape(r.PathValue("id")), body, nil); err != nil {
		p.failedAction(w, r, s, err, page, "Not saved: ")
		return
	}
	p.redirect(w, r, page, Flash{Kind: "ok", Text: done})
}

// endpointClientCert serves POST /ui/endpoints/{id}/client-certificate, as
// the portal's does.
func (u *Dashboard) endpointClientCert(w http.ResponseWriter, r *http.Request, s *dashboardSession) {
	id := url.PathEscape(r.PathValue("id"))
	body, done := clientCertBody(r)
	f := Flash{Kind: "ok", Text: done}
	if err := u.call(r.Context(), s, http.MethodPatch, "/v1/endpoints/"+id, body, nil); err != nil {
		f = Flash{Kind: "error", Text: "Not saved: " + callMessage(err)}
	}
	SetFlash(w, r, DashboardPath, f)
	http.Redirect(w, r, "/ui/endpoints/"+id, http.StatusSeeOther)
}
