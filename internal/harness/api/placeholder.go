package api

import (
	"net/http"
)

// placeholder is the page served at / when no web page is configured (Config.Web): it
// says where the API is.
type placeholder struct{}

const placeholderPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>trueforge harness</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1f2328}code{background:#f3f4f6;padding:.1rem .3rem;border-radius:4px}</style>
</head><body>
<h1>trueforge harness</h1>
<p>This harness serves the HTTP API under <code>/api/v1</code>; its description is at
<a href="/api/v1/openapi.json"><code>/api/v1/openapi.json</code></a>.</p>
<p>Call it with <code>Authorization: Bearer &lt;token&gt;</code>; an administrator makes a token with
<code>trueforge-harness users add NAME</code>.</p>
</body></html>
`

func (placeholder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write([]byte(placeholderPage))
}
