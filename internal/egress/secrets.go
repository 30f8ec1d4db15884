package egress

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Secret is one network-scoped credential: the sandbox sees Name set to a placeholder,
// and the proxy puts Value in its place only in requests to Hosts.
type Secret struct {
	Name  string   // the environment variable, for example GITHUB_TOKEN
	Value string   // never leaves the harness except towards Hosts
	Hosts []string // exact names or "*.suffix"
}

// SecretSource returns the environment's current secrets. The proxy calls it on every
// request that carries a placeholder (and on every TLS CONNECT, to decide what to
// terminate), so a rotated value or changed host list applies to the next request and a
// removed secret stops being substituted at once.
type SecretSource func(ctx context.Context) ([]Secret, error)

// PlaceholderPrefix starts every placeholder: "tfph_" and 32 hex digits (128 random bits),
// different in every sandbox, so a placeholder authenticates nothing and cannot be guessed.
const PlaceholderPrefix = "tfph_"

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func newPlaceholder() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("placeholder: %w", err)
	}
	return PlaceholderPrefix + hex.EncodeToString(b), nil
}

// liveSecret is a current secret with its hosts parsed.
type liveSecret struct {
	value string
	hosts []Pattern
}

// current fetches the secrets this sandbox knows (those it had placeholders for at
// creation), by name. A secret whose host list no longer parses matches no host.
func (p *Proxy) current(ctx context.Context) (map[string]liveSecret, error) {
	out := map[string]liveSecret{}
	if p.cfg.Secrets == nil || len(p.placeholders) == 0 {
		return out, nil
	}
	list, err := p.cfg.Secrets(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if _, known := p.placeholders[s.Name]; !known {
			continue // added after this sandbox was created: it never reaches it
		}
		hosts, err := ParsePatterns("hosts", s.Hosts)
		if err != nil {
			hosts = nil
		}
		out[s.Name] = liveSecret{value: s.Value, hosts: hosts}
	}
	return out, nil
}

// secretHost reports whether host is in the hosts of any current secret.
func secretHost(cur map[string]liveSecret, host string) bool {
	for _, s := range cur {
		if matchAny(s.hosts, host) {
			return true
		}
	}
	return false
}

// substituter replaces this sandbox's placeholders in one request bound for host.
type substituter struct {
	p          *Proxy
	cur        map[string]liveSecret
	host       string
	terminated bool // inside a TLS connection the proxy terminated; false for http://
	used       []string
}

// headers rewrites every header value in place: the placeholder itself, "Bearer
// <placeholder>", and "Basic base64(user:placeholder)" (decoded, replaced, re-encoded).
func (s *substituter) headers(h http.Header) *Denial {
	for k, vs := range h {
		for i, v := range vs {
			nv, d := s.value(v)
			if d != nil {
				return d
			}
			if scheme, enc, ok := strings.Cut(nv, " "); ok && strings.EqualFold(scheme, "basic") {
				raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
				if err == nil && strings.Contains(string(raw), PlaceholderPrefix) {
					dec, d := s.value(string(raw))
					if d != nil {
						return d
					}
					nv = scheme + " " + base64.StdEncoding.EncodeToString([]byte(dec))
				}
			}
			vs[i] = nv
		}
		h[k] = vs
	}
	return nil
}

// check refuses placeholders the request would carry elsewhere (the request target);
// those are never substituted, only headers are.
func (s *substituter) check(v string) *Denial {
	if !strings.Contains(v, PlaceholderPrefix) {
		return nil
	}
	for name, ph := range s.p.placeholders {
		if strings.Contains(v, ph) {
			if d := s.allowed(name); d != nil && d.Reason != "" {
				return d
			}
		}
	}
	return nil
}

func (s *substituter) value(v string) (string, *Denial) {
	if !strings.Contains(v, PlaceholderPrefix) {
		return v, nil
	}
	for name, ph := range s.p.placeholders {
		if !strings.Contains(v, ph) {
			continue
		}
		if d := s.allowed(name); d != nil {
			if d.Reason == "" { // inert: leave the placeholder as it is
				continue
			}
			return "", d
		}
		v = strings.ReplaceAll(v, ph, s.cur[name].value)
		if !slices.Contains(s.used, name) {
			s.used = append(s.used, name)
		}
	}
	return v, nil
}

// allowed decides one placeholder: nil to substitute; a Denial with an empty Reason to
// pass it inert; otherwise the refusal.
func (s *substituter) allowed(name string) *Denial {
	sec, ok := s.cur[name]
	switch {
	case !ok:
		return deny(ReasonSecretRemoved, s.host, "the request carries the placeholder of secret %s, which has been removed from the environment", name)
	case !matchAny(sec.hosts, s.host):
		if s.p.cfg.PassInertPlaceholders {
			return &Denial{}
		}
		return deny(ReasonPlaceholderHost, s.host, "the request carries the placeholder of secret %s, which may be sent only to %s, not to %s", name, patternList(sec.hosts), s.host)
	case !s.terminated:
		return deny(ReasonPlaceholderPlain, s.host, "the request carries the placeholder of secret %s over plain http://; secrets are sent only over https", name)
	}
	return nil
}

func patternList(ps []Pattern) string {
	if len(ps) == 0 {
		return "no host"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
