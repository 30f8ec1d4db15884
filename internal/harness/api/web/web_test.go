package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestAssetsAndHeaders(t *testing.T) {
	h := web.Handler()
	for path, ctype := range map[string]string{
		"/":         "text/html; charset=utf-8",
		"/app.js":   "text/javascript; charset=utf-8",
		"/dom.js":   "text/javascript; charset=utf-8",
		"/md.js":    "text/javascript; charset=utf-8",
		"/hl.js":    "text/javascript; charset=utf-8",
		"/app.css":  "text/css; charset=utf-8",
		"/icon.svg": "image/svg+xml",
	} {
		res := get(t, h, http.MethodGet, path, nil)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("GET %s: %d, %d bytes", path, res.StatusCode, len(body))
		}
		if got := res.Header.Get("Content-Type"); got != ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, ctype)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": web.CSP,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"X-Frame-Options":         "DENY",
			"Cache-Control":           "no-cache",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, want)
			}
		}
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", path)
		}
		// A revalidation with the same ETag is a 304 without a body.
		res = get(t, h, http.MethodGet, path, map[string]string{"If-None-Match": etag})
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match: %d, want 304", path, res.StatusCode)
		}
	}
	// The policy allows no inline script, no eval and no inline style.
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*"} {
		if strings.Contains(web.CSP, bad) {
			t.Errorf("CSP allows %s: %s", bad, web.CSP)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := web.Handler()
	for _, p := range []string{"/nope.js", "/index.html", "/static/app.js", "/../web.go"} {
		if res := get(t, h, http.MethodGet, p, nil); res.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	res := get(t, h, http.MethodPost, "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	if res.Header.Get("Content-Security-Policy") == "" {
		t.Error("an error response has no CSP")
	}
	if res := get(t, h, http.MethodHead, "/app.js", nil); res.StatusCode != 200 {
		t.Errorf("HEAD /app.js: %d", res.StatusCode)
	}
}

// TestNoInlineCodeOrUnsafeSinks: the page has no inline script or style (the CSP would
// block them), and the scripts never turn server text into markup.
func TestNoInlineCodeOrUnsafeSinks(t *testing.T) {
	h := web.Handler()
	read := func(p string) string {
		res := get(t, h, http.MethodGet, p, nil)
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	html := read("/")
	if m := regexp.MustCompile(`<script(?:[^>]*)>[^<]+</script>`).FindString(html); m != "" {
		t.Errorf("inline script in index.html: %s", m)
	}
	if m := regexp.MustCompile(`<style|\sstyle=|\son[a-z]+=`).FindString(html); m != "" {
		t.Errorf("inline style or handler in index.html: %q", m)
	}
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(['"]style`)
	for _, p := range []string{"/app.js", "/dom.js", "/md.js", "/hl.js"} {
		if m := sinks.FindString(read(p)); m != "" {
			t.Errorf("%s uses %s", p, m)
		}
	}
}
