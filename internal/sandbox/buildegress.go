package sandbox

// BuildEgress routes a snapshot build's network through an egress proxy that admits only
// AllowDomains (BuildRequest.Egress). The local backend routes a build without it through
// the same proxy admitting every public host, so that no build shares the host's network.
//
// Backends that build on infrastructure they do not control say so in their docs and
// ignore it: Daytona builds run on Daytona's builders, with their network.
type BuildEgress struct {
	// AllowDomains lists the hosts the build may reach (exact or "*.suffix", as
	// allow_domains takes them); empty admits every public host, through the proxy.
	AllowDomains []string `json:"allow_domains,omitempty"`
}
