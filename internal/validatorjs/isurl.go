// Package validatorjs ports what trueforge needs of validator.js, the library behind
// class-validator's decorators in Daytona's API DTOs, so that a value is refused at plan
// exactly when Daytona's validation would refuse it. The provider's plan checks and the
// Daytona emulator use the same port; its tests pin it to what validator.js itself answers.
package validatorjs

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
)

// IsURL is validator.js 13.15's isURL with its default options, which class-validator's
// @IsUrl() with no options applies (Daytona v0.190's CreateDockerRegistryDto and
// UpdateDockerRegistryDto put it on url: apps/api/src/docker-registry/dto/
// create-docker-registry.dto.ts:17-19, update-docker-registry.dto.ts:17-19; the API's
// yarn.lock pins validator 13.15.15): an optional http, https or ftp scheme, an optional
// user, and a host that is an IP address or a domain name with a top-level domain of
// letters (so "localhost" and a bare "registry" are refused), with an optional port of
// 1-65535; the path is not checked.
func IsURL(s string) bool {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\ufeff' || r == '<' || r == '>' }) ||
		strings.HasPrefix(s, "mailto:") || len(utf16.Encode([]rune(s))) > 2084 {
		return false
	}
	s, _, _ = strings.Cut(s, "#")
	s, _, _ = strings.Cut(s, "?")
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http", "https", "ftp":
		default:
			return false
		}
		s = rest
	} else if strings.HasPrefix(s, "//") {
		return false // a protocol-relative URL
	}
	if s == "" {
		return false
	}
	s, _, _ = strings.Cut(s, "/")
	if at := strings.Split(s, "@"); len(at) > 1 {
		auth := at[0]
		if auth == "" || auth == ":" || strings.Count(auth, ":") > 1 {
			return false
		}
		s = strings.Join(at[1:], "@")
	}
	var host, ipv6, port string
	if m := wrappedIPv6().FindStringSubmatch(s); m != nil {
		ipv6, port = m[1], m[2]
	} else {
		host, port, _ = strings.Cut(s, ":")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if strings.Trim(port, "0123456789") != "" || err != nil || n <= 0 || n > 65535 {
			return false
		}
	}
	return ipv4().MatchString(host) || isFQDN(host) || (ipv6 != "" && isIPv6(ipv6))
}

// The patterns are compiled on first use, not when the program starts: fqdnTLD and
// fqdnLabel, case-insensitive over most of Unicode, take milliseconds to compile, and
// every start of a program that links this package would pay for them (the local
// sandbox's init is such a program, started for each sandbox).
var (
	wrappedIPv6 = lazyRegexp(`^\[([^\]]+)\](?::([0-9]+))?$`)
	ipv4        = lazyRegexp(`^((?:[0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])[.]){3}(?:[0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$`)
	ipv6Zone    = lazyRegexp(`^[0-9a-zA-Z.]+$`)
	// fqdnTLD is isFQDN's top-level domain with require_tld and no numeric TLDs.
	fqdnTLD   = lazyRegexp(`(?i)^([a-z\x{00A1}-\x{00A8}\x{00AA}-\x{D7FF}\x{F900}-\x{FDCF}\x{FDF0}-\x{FFEF}]{2,}|xn[a-z0-9-]{2,})$`)
	fqdnLabel = lazyRegexp(`(?i)^[a-z\x{00a1}-\x{10ffff}0-9-]+$`)
)

// lazyRegexp returns a function that compiles expr the first time it is called.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// isIPv6 is isIP(s, 6): an IPv6 address, with an optional %zone of letters, digits and
// dots.
func isIPv6(s string) bool {
	addr, zone, hasZone := strings.Cut(s, "%")
	if hasZone && !ipv6Zone().MatchString(zone) {
		return false
	}
	a, err := netip.ParseAddr(addr)
	return err == nil && a.Is6() && strings.Contains(addr, ":")
}

// isFQDN is validator.js's isFQDN with isURL's defaults: at least two labels, a TLD of
// two or more letters (or an xn-- label), labels of at most 63 characters without
// underscores, full-width characters or a leading or trailing hyphen.
func isFQDN(s string) bool {
	labels := strings.Split(s, ".")
	if len(labels) < 2 || !fqdnTLD().MatchString(labels[len(labels)-1]) {
		return false
	}
	for _, l := range labels {
		if len(utf16.Encode([]rune(l))) > 63 || !fqdnLabel().MatchString(l) ||
			strings.ContainsFunc(l, func(r rune) bool { return r >= 0xff01 && r <= 0xff5e }) ||
			strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return false
		}
	}
	return true
}
