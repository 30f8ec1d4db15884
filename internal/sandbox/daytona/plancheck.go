package daytona

import (
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/validatorjs"
)

var _ sandbox.RegistryChecker = (*Backend)(nil)

// CheckRegistry refuses a registry URL that Daytona would answer with 400 "url must be
// a URL address" (or change behind our back), saying what it wants instead.
func (b *Backend) CheckRegistry(_ sandbox.ProviderConfig, r sandbox.RegistrySpec) []sandbox.Problem {
	if msg := checkRegistryURL(r.URL); msg != "" {
		return []sandbox.Problem{{Attribute: "url", Summary: "Invalid Attribute Value", Detail: "url: " + msg}}
	}
	return nil
}

func checkRegistryURL(s string) string {
	switch {
	case strings.TrimSpace(s) != s || s == "" || strings.ContainsAny(s, " \t\n"):
		return fmt.Sprintf("%q is not a registry URL; give the registry's host, for example ghcr.io", s)
	case strings.HasSuffix(s, "/"):
		return fmt.Sprintf("registry URL %q ends with '/'; leave it out (Daytona strips it, which would show as a change at every plan)", s)
	case !validatorjs.IsURL(s):
		return fmt.Sprintf("Daytona refuses registry URL %q: it wants a host name with a top-level domain (for example registry.example.com:5000) "+
			"or an IP address (for example 10.0.0.5:5000), with an optional port of 1-65535 and an optional http://, https:// or ftp:// scheme; "+
			"a bare name such as localhost or registry is not accepted", s)
	}
	return ""
}

// RegistryURL is the URL as Daytona stores it (normalizeRegistryUrl in
// apps/api/src/docker-registry/services/docker-registry.service.ts, v0.190).
func (b *Backend) RegistryURL(u string) string {
	if strings.TrimSpace(u) == "" || strings.Contains(strings.ToLower(u), "docker.io") {
		return "docker.io"
	}
	return strings.TrimRight(strings.TrimSpace(u), "/")
}

// CheckRegistryImage refuses an image that Daytona would not pull with registry name:
// Daytona picks the organization's registry whose URL matches the image's host
// (findSourceRegistryBySnapshotImageName in
// apps/api/src/docker-registry/services/docker-registry.service.ts, v0.190), so an
// image of another host would be pulled without these credentials. "" (a public
// image) and the platform image are fine.
func (b *Backend) CheckRegistryImage(name, url, image string) []sandbox.Problem {
	host := b.registryHost(url)
	if image == "" || image == sandbox.PlatformImage || imageHost(image) == host {
		return nil
	}
	return []sandbox.Problem{{Attribute: "image", Summary: "Image Not From Registry",
		Detail: fmt.Sprintf("image %q is pulled from %s, but registry %q is for %s (url %q). Daytona uses the registry whose URL matches the image's host, "+
			"so this image would be pulled without the registry's credentials. Name the image by the registry's host (for example %s/<repository>:<tag>), or fix the registry's url.",
			image, imageHost(image), name, host, url, host)}}
}

// imageHost is the registry host of an image reference, as Docker reads it: the first
// component when it has a '.' or ':' or is localhost, else Docker Hub.
func imageHost(image string) string {
	first, _, ok := strings.Cut(image, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		if strings.Contains(first, "docker.io") {
			return "docker.io"
		}
		return first
	}
	return "docker.io"
}

// registryHost is the host of a registry URL as Daytona stores it (RegistryURL),
// without a scheme or path.
func (b *Backend) registryHost(url string) string {
	u := b.RegistryURL(url)
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	host, _, _ := strings.Cut(u, "/")
	return host
}
