package web_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// formHeader is the Content-Type of a page's form.
var formHeader = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

// paddedForm is v URL-encoded with a pad field that makes it size bytes.
func paddedForm(t *testing.T, v url.Values, size int) string {
	t.Helper()
	body := v.Encode() + "&pad="
	require.LessOrEqual(t, len(body), size)
	return body + strings.Repeat("a", size-len(body))
}

// uploadOf is a multipart/form-data body with a file part of size bytes,
// and its Content-Type.
func uploadOf(t *testing.T, size int) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(t, mw.WriteField("api_key", operatorKey))
	part, err := mw.CreateFormFile("upload", "big.bin")
	require.NoError(t, err)
	_, err = part.Write(bytes.Repeat([]byte{'x'}, size))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestFormLimits: a form of either half of the pages is at most 64 KiB
// (413 past it, nothing done), and a multipart body answers 415 before a
// byte of it is read, so none is parsed into temporary files.
func TestFormLimits(t *testing.T) {
	t.Parallel()

	t.Run("SignInFormPast64KiBAnswers413", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		tests := []struct {
			name string
			size int
			want int
		}{
			{"AtTheLimit", 64 << 10, http.StatusSeeOther},
			{"OneBytePast", 64<<10 + 1, http.StatusRequestEntityTooLarge},
			{"Megabytes", 4 << 20, http.StatusRequestEntityTooLarge},
		}
		for _, tt := range tests {
			body := paddedForm(t, url.Values{"api_key": {operatorKey}}, tt.size)
			a := call(t, e.browser(t), http.MethodPost, e.srv.URL+"/ui/sign-in", "", body, formHeader)
			require.Equal(t, tt.want, a.status, "%s: %s", tt.name, a.body)
			if tt.want == http.StatusRequestEntityTooLarge {
				require.Contains(t, a.body, "larger than 64 KiB", tt.name)
				require.NotContains(t, a.header.Get("Set-Cookie"), "herald_ui=", "%s: no session", tt.name)
			}
		}
	})

	t.Run("PortalFormPast64KiBAnswers413AndChangesNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t, false)
		b := e.browser(t)
		e.signIn(t, b, "cust_42")
		_, csrf := e.home(t, b)
		require.NotEmpty(t, csrf)
		end := e.srv.URL + "/portal/session/end"

		a := call(t, b, http.MethodPost, end, "", paddedForm(t, url.Values{"csrf_token": {csrf}}, 64<<10+1), formHeader)
		require.Equal(t, http.StatusRequestEntityTooLarge, a.status, a.body)
		home, _ := e.home(t, b)
		require.Equal(t, http.StatusOK, home.status, "the session goes on")

		// The CSRF token is read from a form at the limit.
		a = call(t, b, http.MethodPost, end, "", paddedForm(t, url.Values{"csrf_token": {csrf}}, 64<<10), formHeader)
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.Contains(t, a.body, "signed out")
	})

	t.Run("UnreadableFormAnswers400", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		a := call(t, e.browser(t), http.MethodPost, e.srv.URL+"/ui/sign-in", "", "api_key=%zz", formHeader)
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Contains(t, a.body, "could not be read")
	})

	t.Run("MultipartAnswers415Unread", func(t *testing.T) {
		t.Parallel()
		ui, portal := setupUI(t), setup(t, false)
		upload, contentType := uploadOf(t, 3<<20)
		targets := []struct {
			name string
			h    http.Handler
			path string
		}{
			{"SignIn", ui.srv.Config.Handler, "/ui/sign-in"},
			{"DashboardAction", ui.srv.Config.Handler, "/ui/endpoints/ep_x/enable"},
			{"PortalConfirm", portal.srv.Config.Handler, "/portal/confirm"},
			{"PortalSettings", portal.srv.Config.Handler, "/portal/settings"},
		}
		for _, tt := range targets {
			body := &countingReader{r: bytes.NewReader(upload)}
			req := httptest.NewRequest(http.MethodPost, tt.path, body)
			req.Header.Set("Content-Type", contentType)
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, "%s: %s", tt.name, rec.Body)
			require.Contains(t, rec.Body.String(), "no file uploads", tt.name)
			require.Zero(t, body.n, "%s: not a byte of the body is read, so nothing is parsed or stored", tt.name)
		}

		// Over the network too, a few megabytes answer 415 at once.
		a := call(t, ui.browser(t), http.MethodPost, ui.srv.URL+"/ui/sign-in", "", string(upload),
			map[string]string{"Content-Type": contentType})
		require.Equal(t, http.StatusUnsupportedMediaType, a.status, a.body)
		require.NotContains(t, a.header.Get("Set-Cookie"), "herald_ui=")
	})
}
