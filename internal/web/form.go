package web

import (
	"errors"
	"net/http"
	"strings"
)

// maxFormBytes bounds the body of every request to the pages: a form's
// fields, URL-encoded. The largest form is an event type's schema and
// example on the dashboard; a larger one goes through the API
// (PATCH /v1/event-types/{name} takes a megabyte).
const maxFormBytes = 64 << 10

// refuseFunc answers a request with a page of a title and a sentence.
type refuseFunc func(w http.ResponseWriter, r *http.Request, status int, title, text string)

// limitForms serves next, which both halves' route tables sit behind,
// with every request body read through a maxFormBytes limit. A form (a
// POST, PUT or PATCH) is parsed before next runs, so that a body past the
// limit answers 413 and one that cannot be read 400, where the handlers'
// PostFormValue would see an empty form and go on. A multipart body
// answers 415 before a byte of it is read: no page uploads files, and
// PostFormValue (the CSRF check's too) would parse it with
// ParseMultipartForm, which writes large parts to temporary files.
// refuse answers the page of each refusal.
func limitForms(next http.Handler, refuse refuseFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Lower case and trimmed as mime.ParseMediaType, and so
		// ParseMultipartForm, reads it; any multipart type is refused,
		// whatever its parameters and the method.
		ct := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Type")))
		if strings.HasPrefix(ct, "multipart/") {
			// The body is left unread: net/http reads no more of a large
			// one, and closes the connection.
			w.Header().Set("Connection", "close")
			refuse(w, r, http.StatusUnsupportedMediaType, "Not accepted",
				"The pages take no file uploads. Send the form from its page.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			var tooLarge *http.MaxBytesError
			if err := r.ParseForm(); errors.As(err, &tooLarge) {
				refuse(w, r, http.StatusRequestEntityTooLarge, "Too large",
					"This form is larger than 64 KiB and was refused.")
				return
			} else if err != nil {
				refuse(w, r, http.StatusBadRequest, "Not readable",
					"This form could not be read. Reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
