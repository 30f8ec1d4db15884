package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// signUp adds user name (not an admin) to st and returns the API token that signs them in.
func signUp(t *testing.T, st *store.Store, name string) string {
	t.Helper()
	token, hash, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateUser(context.Background(), name, false, hash); err != nil {
		t.Fatal(err)
	}
	return token
}

// serveWeb serves srv (through wrap, if any) on loopback until the test ends, then shuts
// srv down, which ends its runs and event streams.
func serveWeb(t *testing.T, srv *api.Server, wrap ...func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler = srv
	for _, w := range wrap {
		h = w(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ts
}

// enter signs in with token on the desktop layout and waits until the chat page shows
// and ready (a JavaScript expression) holds; signIn is the same with the sign-in page's
// own checks.
func (x *e2e) enter(token, ready string) {
	x.t.Helper()
	x.do("signing in", desktop, chromedp.Navigate(x.base), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login-submit")))
	x.wait("the chat page", ready, 10*time.Second)
}
