package daytona

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// allowedDomainRE is the pattern Daytona's domainAllowList entries must match
// (validateDomainAllowList, apps/api/src/sandbox/utils/network-validation.util.ts:49,
// v0.190): dotted host labels of ASCII letters, digits and inner hyphens, an optional
// leading "*." and a top-level domain of two or more ASCII letters. A sandbox create with
// any other entry is a 400 `Invalid domain: "x". Must be a valid domain name`.
var allowedDomainRE = lazyRegexp(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$`)

// badAllowedDomain returns the first of domains Daytona's domainAllowList refuses (the
// server trims each entry and skips empty ones), and whether there is one. It is the one
// rule for the plan check (checkAllowDomains) and the runtime's create.
func badAllowedDomain(domains []string) (string, bool) {
	for _, d := range domains {
		if d = strings.TrimSpace(d); d != "" && !allowedDomainRE().MatchString(d) {
			return d, true
		}
	}
	return "", false
}

// checkAllowDomains reports the environment's allowed domains Daytona would refuse at
// every sandbox create: more than MaxDomains, and an entry its domainAllowList pattern
// refuses (a single-label name such as localhost, an IP address, a trailing dot, a
// non-ASCII or punycode top-level domain).
func checkAllowDomains(env sandbox.EnvironmentSpec) []sandbox.Problem {
	var ps []sandbox.Problem
	if len(env.AllowDomains) > MaxDomains {
		ps = append(ps, sandbox.Problem{Attribute: "network.allow_domains", Summary: "Too Many Allowed Domains For Daytona",
			Detail: fmt.Sprintf("network.allow_domains has %d entries; Daytona's domainAllowList takes at most %d. Use `*.` wildcards to cover several hosts of one domain, or split the work across environments. "+
				"The count includes the hosts of network.package_indexes when package_indexes_in is \"build_and_sandbox\".",
				len(env.AllowDomains), MaxDomains)})
	}
	if d, bad := badAllowedDomain(env.AllowDomains); bad {
		ps = append(ps, sandbox.Problem{Attribute: "network.allow_domains", Summary: "Allowed Domain Refused By Daytona",
			Detail: fmt.Sprintf("Environment %q allows the domain %q, which Daytona's domainAllowList refuses: it takes only dotted host names that end in a top-level domain of ASCII letters, "+
				"such as api.example.com or *.example.com, so single-label names (localhost), IP addresses, a trailing dot and non-ASCII or punycode top-level domains are refused, and every sandbox create would fail. "+
				"Give the host's full name (a non-ASCII label in its xn-- form), or remove the entry (a host of network.package_indexes counts when package_indexes_in is \"build_and_sandbox\").",
				env.Name, d)})
	}
	return ps
}

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
