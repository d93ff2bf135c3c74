package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

const (
	orderSchema  = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`
	orderExample = `{"order_id":"ord_1"}`
)

// catalogEntry puts an entry in the catalog through the API.
func (e *dashboardEnv) catalogEntry(t *testing.T, body string) {
	t.Helper()
	a := call(t, e.srv.Client(), http.MethodPost, e.srv.URL+"/v1/event-types", operatorKey, body, nil)
	require.Equal(t, http.StatusCreated, a.status, a.body)
}

// catalogStatus is the status of GET /v1/event-types/{name} with the
// operator key, and its body.
func (e *dashboardEnv) catalogGet(t *testing.T, name string) answer {
	t.Helper()
	return call(t, e.srv.Client(), http.MethodGet, e.srv.URL+"/v1/event-types/"+url.PathEscape(name), operatorKey, "", nil)
}

// operatorPage is a dashboard browser signed in with the operator key.
type operatorPage struct {
	t    *testing.T
	e    *dashboardEnv
	b    *http.Client
	csrf string
}

func (e *dashboardEnv) operatorBrowser(t *testing.T) *operatorPage {
	t.Helper()
	b := e.browser(t)
	return &operatorPage{t: t, e: e, b: b, csrf: e.signIn(t, b, operatorKey)}
}

func (o *operatorPage) get(path string) answer {
	o.t.Helper()
	return call(o.t, o.b, http.MethodGet, o.e.srv.URL+path, "", "", nil)
}

func (o *operatorPage) post(path string, v url.Values) answer {
	o.t.Helper()
	v.Set("csrf_token", o.csrf)
	return form(o.t, o.b, o.e.srv.URL+path, v, map[string]string{"Origin": o.e.srv.URL, "Sec-Fetch-Site": "same-origin"})
}

func TestDashboardEventTypes(t *testing.T) {
	t.Parallel()
	builtIn := herald.NotificationTypes()[0].Name

	t.Run("ListAndPageShowTheCatalog", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		e.catalogEntry(t, `{"name":"order.created","description":"An order was placed <b>now</b>.","schema":`+orderSchema+`,"example":`+orderExample+`}`)
		e.catalogEntry(t, `{"name":"order.note","description":"A note on an order."}`)
		o := e.operatorBrowser(t)

		list := o.get("/ui/event-types")
		require.Equal(t, http.StatusOK, list.status, list.body)
		require.Contains(t, list.body, `<a href="/ui/event-types" aria-current="page">Event types</a>`)
		ids, rows := tableRows(t, strings.ReplaceAll(list.body, `<tr id="type-`, `<tr id="row-`))
		require.Contains(t, ids, "order.created")
		require.Contains(t, ids, builtIn)
		require.Equal(t, "An order was placed <b>now</b>.", rows["order.created"]["description"])
		require.NotContains(t, list.body, "<b>now</b>", "a description is shown as text")
		require.Equal(t, "yes", rows["order.created"]["schema"])
		require.Equal(t, "yes", rows["order.created"]["example"])
		require.Equal(t, "none", rows["order.note"]["schema"])
		require.Equal(t, "none", rows["order.note"]["example"])
		require.Contains(t, rows[builtIn]["name"], "built in")
		require.NotContains(t, rows["order.created"]["name"], "built in")
		require.Contains(t, rows["order.created"]["name.html"], `href="/ui/event-types/order.created"`)

		page := o.get("/ui/event-types/order.created")
		require.Equal(t, http.StatusOK, page.status, page.body)
		text := html.UnescapeString(page.body)
		require.Contains(t, text, "{\n  \"type\": \"object\",\n  \"required\": [\n    \"order_id\"\n  ],")
		require.Contains(t, text, "<pre id=\"example-json\">{\n  \"order_id\": \"ord_1\"\n}</pre>")
		require.Contains(t, page.body, `id="eventtype-form"`)
		require.Contains(t, page.body, `href="/ui/event-types/order.created/delete"`)

		bi := o.get("/ui/event-types/" + url.PathEscape(builtIn))
		require.Equal(t, http.StatusOK, bi.status, bi.body)
		require.Contains(t, bi.body, "built in")
		require.Contains(t, bi.body, `id="example-json"`)
		require.NotContains(t, bi.body, `id="eventtype-form"`, "a built-in type has no edit form")
		require.NotContains(t, bi.body, "/delete")
		del := o.get("/ui/event-types/" + url.PathEscape(builtIn) + "/delete")
		require.Equal(t, http.StatusBadRequest, del.status)
		a := o.post("/ui/event-types/"+url.PathEscape(builtIn)+"/delete", url.Values{})
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, http.StatusOK, e.catalogGet(t, builtIn).status)

		missing := o.get("/ui/event-types/no.such.type")
		require.Equal(t, http.StatusNotFound, missing.status)
	})

	t.Run("CreateRefusedShowsTheReasonAndKeepsTheInput", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		o := e.operatorBrowser(t)
		a := o.post("/ui/event-types", url.Values{"name": {"order.created"}, "description": {"Placed & paid"},
			"schema": {`"string"`}, "example": {orderExample}})
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Contains(t, html.UnescapeString(a.body), "schema must be a JSON Schema (draft 2020-12): an object, or true or false")
		require.Contains(t, a.body, `id="form-error"`)
		require.Contains(t, a.body, `name="name" value="order.created"`)
		require.Contains(t, a.body, `value="Placed &amp; paid"`)
		require.Contains(t, a.body, `>&#34;string&#34;</textarea>`)
		require.Contains(t, a.body, `>{&#34;order_id&#34;:&#34;ord_1&#34;}</textarea>`)
		require.Equal(t, http.StatusNotFound, e.catalogGet(t, "order.created").status)

		a = o.post("/ui/event-types", url.Values{"name": {"order.created"}, "schema": {orderSchema}, "example": {`{"order_id":`}})
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Contains(t, a.body, "example is not valid JSON")
		require.Contains(t, html.UnescapeString(a.body), `{"order_id":</textarea>`)
		require.Equal(t, http.StatusNotFound, e.catalogGet(t, "order.created").status)

		a = o.post("/ui/event-types", url.Values{"name": {"herald.mine"}})
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Contains(t, html.UnescapeString(a.body), `name must not start with "herald."`)

		e.catalogEntry(t, `{"name":"order.taken"}`)
		a = o.post("/ui/event-types", url.Values{"name": {"order.taken"}})
		require.Equal(t, http.StatusConflict, a.status, a.body)
		require.Contains(t, a.body, "in the catalog already")
	})

	t.Run("CreateEditDelete", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		o := e.operatorBrowser(t)
		a := o.post("/ui/event-types", url.Values{"name": {"order.created"}, "description": {"An order was placed."},
			"schema": {orderSchema}, "example": {orderExample}})
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/ui/event-types/order.created", a.header.Get("Location"))
		page := o.get(a.header.Get("Location"))
		require.Equal(t, http.StatusOK, page.status)
		require.Contains(t, page.body, "Added order.created to the catalog.")
		got := e.catalogGet(t, "order.created")
		require.Equal(t, http.StatusOK, got.status)
		require.Contains(t, got.body, `"description":"An order was placed."`)
		require.Contains(t, got.body, `"example":{"order_id":"ord_1"}`)

		// An example the schema refuses: the API's reason, the edit kept.
		a = o.post("/ui/event-types/order.created", url.Values{"description": {"Changed"}, "schema": {orderSchema}, "example": {`{"order_id":7}`}})
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Contains(t, a.body, "example does not match the schema")
		require.Contains(t, a.body, `value="Changed"`)
		require.Contains(t, a.body, `>{&#34;order_id&#34;:7}</textarea>`)
		require.Contains(t, e.catalogGet(t, "order.created").body, `"description":"An order was placed."`)

		// An empty schema removes it; the example stays as typed.
		a = o.post("/ui/event-types/order.created", url.Values{"description": {"Placed, paid or not."}, "schema": {""}, "example": {`{"order_id":7}`}})
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/ui/event-types/order.created", a.header.Get("Location"))
		require.Contains(t, o.get(a.header.Get("Location")).body, "Saved.")
		got = e.catalogGet(t, "order.created")
		require.Contains(t, got.body, `"description":"Placed, paid or not."`)
		require.Contains(t, got.body, `"schema":null`)
		require.Contains(t, got.body, `"example":{"order_id":7}`)

		confirm := o.get("/ui/event-types/order.created/delete")
		require.Equal(t, http.StatusOK, confirm.status)
		require.Contains(t, confirm.body, `action="/ui/event-types/order.created/delete"`)
		require.Equal(t, http.StatusOK, e.catalogGet(t, "order.created").status, "asking is not deleting")
		a = o.post("/ui/event-types/order.created/delete", url.Values{})
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/ui/event-types", a.header.Get("Location"))
		list := o.get("/ui/event-types")
		require.Contains(t, list.body, "Deleted order.created")
		require.NotContains(t, list.body, `id="type-order.created"`)
		require.Equal(t, http.StatusNotFound, e.catalogGet(t, "order.created").status)
	})

	t.Run("FormsNeedTheCSRFToken", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		e.catalogEntry(t, `{"name":"order.created"}`)
		o := e.operatorBrowser(t)
		for _, path := range []string{"/ui/event-types", "/ui/event-types/order.created", "/ui/event-types/order.created/delete"} {
			a := form(t, o.b, e.srv.URL+path, url.Values{"name": {"order.forged"}, "description": {"forged"}}, nil)
			require.Equal(t, http.StatusForbidden, a.status, path)
		}
		got := e.catalogGet(t, "order.created")
		require.Equal(t, http.StatusOK, got.status)
		require.Contains(t, got.body, `"description":""`)
		require.Equal(t, http.StatusNotFound, e.catalogGet(t, "order.forged").status)
	})

	t.Run("AConsumerCannotReachThem", func(t *testing.T) {
		t.Parallel()
		e := setupUI(t)
		e.catalogEntry(t, `{"name":"order.created"}`)
		b := e.browser(t)
		a := form(t, b, e.srv.URL+"/ui/sign-in", url.Values{"api_key": {consumerKey}}, nil)
		require.Equal(t, http.StatusForbidden, a.status)
		for _, path := range []string{"/ui/event-types", "/ui/event-types/order.created"} {
			a = call(t, b, http.MethodGet, e.srv.URL+path, "", "", nil)
			require.Equal(t, http.StatusSeeOther, a.status, path)
			require.Equal(t, "/ui/sign-in", a.header.Get("Location"))
		}
		a = form(t, b, e.srv.URL+"/ui/event-types/order.created/delete", url.Values{}, nil)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Equal(t, http.StatusOK, e.catalogGet(t, "order.created").status)
	})
}
