package auth

import (
	"crypto/subtle"
	"net/http"
)

// LinkCSRFToken is the form token of the page that opens the portal link
// whose token is link: CSRFToken of the link token, the same construction
// as a session's and a confirmation link's.
func LinkCSRFToken(link string) string { return CSRFToken(link) }

// CheckLinkOpen returns why r, the POST that spends the portal link whose
// token is link and opens its session, is refused, or "" to let it
// through.
//
// A GET of a link only shows a page with a button (a mail scanner's or a
// chat preview's fetch spends nothing and sets no cookie); the button
// POSTs. That POST is where login CSRF would happen: a consumer, who holds
// links of its own, makes a victim's browser post one (a form on its own
// site that submits itself), and the victim then works in the consumer's
// portal, typing a notice address or a receiver URL into someone else's
// account. The link's token is no defence there: the consumer knows it,
// and can read the page and its form token like anyone holding the link.
// What the consumer cannot forge is what the victim's browser says about
// where the form came from. So, unlike CheckCSRF, which lets a request
// without those headers through on the strength of a session-bound token,
// this check requires a browser's word that the POST comes from Herald's
// own page: Sec-Fetch-Site same-origin, or, from a browser that does not
// send it, an Origin that is the site browsers reach Herald at (every
// current browser sends at least one of them on a form POST). A request
// with neither is refused: a script that wants a session has API keys.
//
// The form's token (LinkCSRFToken) is checked too. It binds the POST to
// the page of that very link, so a POST of a guessed or replayed form
// body to another path opens nothing; it is not what stops a link's owner.
//
// A cookie set by the GET, checked by the POST (double submit), would tie
// the two to one browser, but a GET of a link must leave no trace, and the
// attacker's POST would come from the victim's browser anyway.
func CheckLinkOpen(r *http.Request, link string) string {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	switch {
	case site != "" && site != "same-origin":
		return "This link was posted from another site (Sec-Fetch-Site: " + site + ") and was not opened. Open the link itself in your browser."
	case origin != "" && !sameOrigin(r, origin):
		return "This link was posted from another origin (" + origin + ") and was not opened. Open the link itself in your browser."
	case site == "" && origin == "":
		return "This request does not say where it came from, so the link was not opened. Open the link in a current browser."
	}
	got := r.PostFormValue(CSRFField)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(LinkCSRFToken(link))) != 1 {
		return "This request lacks the page's token and was not opened. Open the link again and press the button."
	}
	return ""
}
