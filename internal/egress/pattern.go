package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// Pattern is one allow_domains entry or one secret host: an exact host name, or
// "*.suffix", which matches every name below suffix but not suffix itself.
type Pattern struct {
	name     string // lower case, no trailing dot; for a wildcard the suffix
	wildcard bool
}

// ParsePattern checks one entry by the same rules the provider applies at plan time
// (internal/provider/validators.go): no scheme, port, path or IP literal; a wildcard only
// as a leading "*." over at least two labels, so "*" and "*.com" are refused.
func ParsePattern(s string) (Pattern, error) {
	switch {
	case s == "":
		return Pattern{}, fmt.Errorf("a host must not be empty")
	case s == "*":
		return Pattern{}, fmt.Errorf(`"*" would match every host; list the hosts, or leave the allow list empty for unrestricted egress`)
	case strings.Contains(s, "://"):
		return Pattern{}, fmt.Errorf("%q has a scheme; give the host name only (for example api.github.com)", s)
	case strings.ContainsAny(s, "/?#@ \t\r\n"):
		return Pattern{}, fmt.Errorf("%q has a path, user part or space; give the host name only (for example api.github.com)", s)
	case strings.Contains(s, ":") || strings.HasPrefix(s, "["):
		return Pattern{}, fmt.Errorf("%q has a port or is an IPv6 literal; give the host name only", s)
	}
	wildcard := strings.HasPrefix(s, "*.")
	name := strings.TrimPrefix(s, "*.")
	if strings.Contains(name, "*") {
		return Pattern{}, fmt.Errorf("%q: a wildcard is allowed only as a leading \"*.\" (for example *.github.com)", s)
	}
	norm, err := NormalizeHost(name)
	if err != nil {
		return Pattern{}, fmt.Errorf("%q: %w", s, err)
	}
	if _, err := netip.ParseAddr(norm); err == nil || allDigitLabels(norm) {
		return Pattern{}, fmt.Errorf("%q is an IP address; policies name hosts, not addresses", s)
	}
	if wildcard && !strings.Contains(norm, ".") {
		return Pattern{}, fmt.Errorf("%q matches a whole top-level domain; name a registered domain (for example *.example.com)", s)
	}
	return Pattern{name: norm, wildcard: wildcard}, nil
}

// ParsePatterns parses a list, naming the field and index of the first bad entry.
func ParsePatterns(field string, list []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(list))
	for i, s := range list {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Match reports whether the normalized host name matches.
func (p Pattern) Match(host string) bool {
	if !p.wildcard {
		return host == p.name
	}
	return len(host) > len(p.name)+1 && strings.HasSuffix(host, p.name) && host[len(host)-len(p.name)-1] == '.'
}

func (p Pattern) String() string {
	if p.wildcard {
		return "*." + p.name
	}
	return p.name
}

func matchAny(ps []Pattern, host string) bool {
	for _, p := range ps {
		if p.Match(host) {
			return true
		}
	}
	return false
}

// NormalizeHost lower-cases a host name and strips one trailing dot, refusing anything
// that is not a plain LDH name or an IP literal. It is wire.NormalizeHost: netd applies
// the same rules to the names the sandbox looks up.
func NormalizeHost(h string) (string, error) { return wire.NormalizeHost(h) }

func allDigitLabels(h string) bool {
	return strings.Trim(h, "0123456789.") == ""
}
