package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// TokenPrefix starts every API token, so that one is recognised in a log or a paste
// (and by secret scanners).
const TokenPrefix = "tfu_"

// CookieName is the login cookie.
const CookieName = "trueforge_session"

// CSRFHeader carries the login's CSRF token on state-changing requests made with the
// cookie.
const CSRFHeader = "X-Trueforge-CSRF"

// NewToken makes an API token, 32 random bytes printed as tfu_<base64url>, and the hash
// the store keeps (HashToken). The token is shown once and never stored.
func NewToken() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is what the store keeps of a token, or of a login cookie: the hex SHA-256.
// Both are 256-bit random values, so no salt or slow hash is needed.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// csrfToken is the CSRF token of a login: derived from the cookie's value, so every
// replica computes it without storing it, and a page that cannot read the cookie
// (HttpOnly) cannot compute it either.
func csrfToken(cookie string) string {
	sum := sha256.Sum256([]byte("trueforge-csrf\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authKind is what a route needs of its caller.
type authKind int

const (
	authNone    authKind = iota // anyone
	authUser                    // a user, by token or login cookie
	authAdmin                   // an admin user
	authMetrics                 // an admin, unless metrics are public
	// authSession is authUser on a route of session {id} (see own): a bearer token's
	// user and the session are read in one statement, both afresh for this request.
	authSession
)

// caller is who makes a request.
type caller struct {
	user store.User
	// cookie is the login cookie's value when the request was authenticated by it.
	cookie string
	login  store.Login
	// sess is session {id} as read with the token's user (authSession), whoever owns
	// it; sessRead says it was read, sessFound that it exists. Per request, never kept.
	sess                store.Session
	sessRead, sessFound bool
}

// authenticate finds the caller a route needs: a bearer token (which wins when given),
// else the login cookie; state-changing requests on a cookie must carry the login's CSRF
// token and, when they send an Origin, come from this host.
func (s *Server) authenticate(r *http.Request, kind authKind) (*caller, error) {
	if kind == authNone || (kind == authMetrics && s.cfg.MetricsPublic) {
		return nil, nil
	}
	c, err := s.identify(r, kind)
	if err != nil {
		return nil, err
	}
	if c.cookie != "" && stateChanging(r.Method) {
		if err := checkOrigin(r); err != nil {
			return nil, err
		}
		got := r.Header.Get(CSRFHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(c.cookie))) != 1 {
			return nil, errorf(http.StatusForbidden, CodeCSRF, "a request made with the login cookie that changes something must carry the %s header "+
				"with the csrf_token that POST /api/v1/login (or GET /api/v1/me) returned", CSRFHeader)
		}
	}
	if (kind == authAdmin || kind == authMetrics) && !c.user.Admin {
		return nil, errorf(http.StatusForbidden, CodeAdminOnly, "only an admin may do this; user %q is not one (trueforge-harness users add NAME --admin makes one)", c.user.Name)
	}
	return c, nil
}

// identify authenticates the request by its bearer token or login cookie; on an
// authSession route with a token, session {id} is read by the same statement.
func (s *Server) identify(r *http.Request, kind authKind) (*caller, error) {
	ctx := r.Context()
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return nil, errorf(http.StatusUnauthorized, CodeUnauthorized, "the Authorization header must be \"Bearer <token>\"")
		}
		var (
			u   store.User
			err error
			c   caller
		)
		if kind == authSession {
			u, c.sess, c.sessFound, err = s.cfg.Store.UserAndSession(ctx, HashToken(token), r.PathValue("id"))
			c.sessRead = err == nil
		} else {
			u, err = s.cfg.Store.UserByTokenHash(ctx, HashToken(token))
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, CodeUnauthorized, "the token is not valid: it was rotated, its user was removed, or it is mistyped")
		}
		if err != nil {
			return nil, err
		}
		c.user = u
		return &c, nil
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, errorf(http.StatusUnauthorized, CodeUnauthorized, "sign in: send \"Authorization: Bearer <token>\", or log in with POST /api/v1/login")
	}
	u, l, err := s.cfg.Store.LoginUser(ctx, HashToken(ck.Value), s.cfg.Now(), s.cfg.LoginTTL)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusUnauthorized, CodeUnauthorized, "the login has ended (it lapsed, was logged out, or its user was removed); log in again")
	}
	if err != nil {
		return nil, err
	}
	return &caller{user: u, cookie: ck.Value, login: l}, nil
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// checkOrigin refuses a browser request from another site: an Origin, when sent, must be
// this host, and Sec-Fetch-Site must not say cross-site.
func checkOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" {
		return errorf(http.StatusForbidden, CodeBadOrigin, "a cross-site request may not use the login cookie")
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return errorf(http.StatusForbidden, CodeBadOrigin, "the request's Origin %q is not this server (%s)", origin, r.Host)
	}
	return nil
}

// loginRequest is POST /api/v1/login's body.
type loginRequest struct {
	Token string `json:"token"`
}

func (b loginRequest) check() error { return required("token", b.Token) }

// meJSON is who the caller is.
type meJSON struct {
	Name           string     `json:"name"`
	Admin          bool       `json:"admin"`
	Auth           string     `json:"auth"` // "bearer" or "cookie"
	CSRFToken      string     `json:"csrf_token,omitempty"`
	LoginExpiresAt *time.Time `json:"login_expires_at,omitempty"`
	// TraceURL is Config.TraceURL, for the page to link turns to their traces.
	TraceURL string `json:"trace_url,omitempty"`
}

func (s *Server) meOf(c *caller) meJSON {
	m := meJSON{Name: c.user.Name, Admin: c.user.Admin, Auth: "bearer", TraceURL: s.cfg.TraceURL}
	if c.cookie != "" {
		exp := c.login.ExpiresAt.UTC()
		m.Auth, m.CSRFToken, m.LoginExpiresAt = "cookie", csrfToken(c.cookie), &exp
	}
	return m
}

// login exchanges a token for a login cookie (for the web page).
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	var req loginRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	u, err := s.cfg.Store.UserByTokenHash(r.Context(), HashToken(strings.TrimSpace(req.Token)))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "the token is not valid: it was rotated, its user was removed, or it is mistyped")
	}
	if err != nil {
		return err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	exp := s.cfg.Now().Add(s.cfg.LoginTTL)
	if err := s.cfg.Store.CreateLogin(r.Context(), HashToken(id), u.Name, exp); err != nil {
		return err
	}
	// Lapsed logins are deleted now and then, here: logins are made rarely enough.
	if _, err := s.cfg.Store.PruneLogins(r.Context(), s.cfg.Now()); err != nil {
		s.log.Warn("pruning lapsed logins", "err", err)
	}
	http.SetCookie(w, s.cookie(r, id, 0))
	writeJSON(w, http.StatusOK, s.meOf(&caller{user: u, cookie: id, login: store.Login{ExpiresAt: exp}}))
	return nil
}

// cookie is the login cookie: a browser-session cookie (the server enforces the expiry,
// which slides), HttpOnly, SameSite=Strict, Secure over TLS or behind a TLS proxy.
// maxAge < 0 deletes it.
func (s *Server) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.cfg.SecureCookies}
}

// logout ends the caller's login (a bearer caller has none: nothing to do).
func (s *Server) logout(w http.ResponseWriter, r *http.Request, c *caller) error {
	if c.cookie != "" {
		if err := s.cfg.Store.DeleteLogin(r.Context(), HashToken(c.cookie)); err != nil {
			return err
		}
		http.SetCookie(w, s.cookie(r, "", -1))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) me(w http.ResponseWriter, _ *http.Request, c *caller) error {
	writeJSON(w, http.StatusOK, s.meOf(c))
	return nil
}
