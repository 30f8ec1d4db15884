package egress

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

var discardLog = log.New(io.Discard, "", 0)

// plain carries an absolute-form http:// request. The target is the URL's host; the
// outgoing Host header is always set from it.
func (p *Proxy) plain(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "" || r.URL.Scheme != "http" {
		d := deny(ReasonUnsupported, r.Host, "the proxy carries CONNECT and absolute http:// requests; for https use CONNECT (set HTTPS_PROXY)")
		p.logDeny("plain", r.Host, "", r, d)
		d.serve(w)
		return
	}
	port := r.URL.Port()
	if port == "" {
		port = "80"
	}
	host, port, d := target(r.URL.Hostname(), port)
	if d == nil {
		d = p.checkHost(host)
	}
	if d != nil {
		p.logDeny("plain", host, port, r, d)
		d.serve(w)
		return
	}
	p.forward(w, r, "http", host, port, false)
}

// forward substitutes placeholders and sends the request to scheme://host:port, the
// target the sandbox connected to (never its Host header), dialling only checked
// addresses.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, scheme, host, port string, terminated bool) {
	mode := "plain"
	if terminated {
		mode = "terminate"
	}
	start := time.Now()
	s := &substituter{p: p, host: host, terminated: terminated}
	d := s.load(r.Context(), r)
	if d == nil {
		d = s.check(r.URL.RequestURI())
	}
	if d == nil {
		d = s.headers(r.Header)
	}
	if d != nil {
		p.logDeny(mode, host, port, r, d)
		d.serve(w)
		return
	}
	authority := net.JoinHostPort(host, port)
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		authority = strings.TrimSuffix(authority, ":"+port)
	}
	dec := Decision{Time: start, Allowed: true, Mode: mode, Host: host, Port: port, Method: r.Method, Path: r.URL.Path}
	logged := false
	var failed *Denial
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: scheme, Host: authority, Path: pr.In.URL.Path, RawPath: pr.In.URL.RawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = ""
		},
		Transport:     p.transport,
		FlushInterval: -1, // stream (server-sent events, token streams) as it arrives
		BufferPool:    bufferPool{},
		ErrorLog:      discardLog,
		// The decision is logged when the upstream has answered, before its body is
		// relayed: the sandbox gets no byte of a response whose decision is not in the
		// log yet, so a session's log has it before the command that asked ends.
		ModifyResponse: func(*http.Response) error {
			dec.Secrets, logged = s.used, true
			p.log(dec)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				failed = deny(ReasonUpstreamFailed, host, "the sandbox closed the request")
				return
			}
			failed = asDenial(err, host)
			failed.serve(w)
		},
	}
	rp.ServeHTTP(w, r)
	if logged {
		return
	}
	dec.Secrets = s.used
	if failed != nil {
		dec.Allowed, dec.Reason, dec.Message = false, failed.Reason, failed.Message
	}
	p.log(dec)
}

// load reads the current secrets when the request carries anything that may be a
// placeholder, so rotation and removal are seen on this very request.
func (s *substituter) load(ctx context.Context, r *http.Request) *Denial {
	if len(s.p.placeholders) == 0 || !mayCarryPlaceholder(r) {
		return nil
	}
	cur, err := s.p.current(ctx)
	if err != nil {
		return deny(ReasonSecretSourceError, s.host, "the environment's secrets could not be read: %v", err)
	}
	s.cur = cur
	return nil
}

// mayCarryPlaceholder is a cheap scan: a placeholder in the target or a header, or a
// Basic credential that may hide one.
func mayCarryPlaceholder(r *http.Request) bool {
	if strings.Contains(r.URL.RequestURI(), PlaceholderPrefix) {
		return true
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, PlaceholderPrefix) || len(v) > 6 && strings.EqualFold(v[:6], "basic ") {
				return true
			}
		}
	}
	return false
}
