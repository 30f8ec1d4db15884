package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// PURL is the package URL (github.com/package-url/purl-spec) of p in manifest m:
// pkg:deb/debian/NAME@VERSION?arch=ARCH, pkg:apk/alpine/NAME@VERSION?arch=ARCH,
// pkg:pypi/NAME@VERSION, pkg:npm/NAMESPACE/NAME@VERSION.
func PURL(m Manifest, p Package) string {
	var ns, name string
	switch p.Ecosystem {
	case Deb:
		ns = m.Distro
		if ns == "" {
			ns = "debian"
		}
		name = p.Name
	case APK:
		ns = m.Distro
		if ns == "" {
			ns = "alpine"
		}
		name = p.Name
	case NPM:
		if scope, n, ok := strings.Cut(p.Name, "/"); ok && strings.HasPrefix(scope, "@") {
			ns, name = scope, n
		} else {
			name = p.Name
		}
	default:
		name = p.Name
	}
	var b strings.Builder
	b.WriteString("pkg:" + p.Ecosystem + "/")
	if ns != "" {
		b.WriteString(purlEscape(ns) + "/")
	}
	b.WriteString(purlEscape(name) + "@" + purlEscape(p.Version))
	var q []string
	if p.Arch != "" {
		q = append(q, "arch="+purlEscape(p.Arch))
	}
	if (p.Ecosystem == Deb || p.Ecosystem == APK) && m.Distro != "" && m.DistroVersion != "" {
		q = append(q, "distro="+purlEscape(m.Distro+"-"+m.DistroVersion))
	}
	if len(q) > 0 {
		b.WriteString("?" + strings.Join(q, "&"))
	}
	return b.String()
}

// purlEscape percent-encodes everything but unreserved characters, as the purl spec
// asks of each component (so "+" in a Debian version is %2B, an epoch's ":" is %3A).
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// CycloneDX spells a manifest as a CycloneDX 1.5 JSON SBOM describing the snapshot
// subject (its id): one "library" component per package, with its purl as bom-ref, and
// the manifest's digest as a property. The document is deterministic: no timestamp, and
// a serial number derived from the digest.
func CycloneDX(m Manifest, subject string) ([]byte, error) {
	type property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type component struct {
		Type       string     `json:"type"`
		BOMRef     string     `json:"bom-ref,omitempty"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Properties []property `json:"properties,omitempty"`
	}
	digest := m.Digest()
	comps := make([]component, 0, len(m.Packages))
	for _, p := range m.Packages {
		purl := PURL(m, p)
		comps = append(comps, component{Type: "library", BOMRef: purl, Name: p.Name, Version: p.Version, PURL: purl,
			Properties: []property{{Name: "trueforge:ecosystem", Value: p.Ecosystem}}})
	}
	props := []property{{Name: "trueforge:manifest_digest", Value: digest}}
	if m.Omitted > 0 {
		props = append(props, property{Name: "trueforge:omitted_packages", Value: fmt.Sprint(m.Omitted)})
	}
	doc := struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Version      int    `json:"version"`
		Metadata     struct {
			Tools struct {
				Components []component `json:"components"`
			} `json:"tools"`
			Component  component  `json:"component"`
			Properties []property `json:"properties"`
		} `json:"metadata"`
		Components []component `json:"components"`
	}{BOMFormat: "CycloneDX", SpecVersion: "1.5", SerialNumber: serialFromDigest(digest), Version: 1, Components: comps}
	doc.Metadata.Tools.Components = []component{{Type: "application", Name: "trueforge"}}
	doc.Metadata.Component = component{Type: "container", BOMRef: subject, Name: subject}
	doc.Metadata.Properties = props
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// serialFromDigest makes an RFC 4122 URN (version 5 layout) out of the digest's first
// 16 bytes, so the same manifest always has the same serial number.
func serialFromDigest(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) < 32 {
		h = (h + strings.Repeat("0", 32))[:32]
	}
	b := []byte(h[:32])
	b[12] = '5'                                                    // version 5
	b[16] = "89ab"[strings.IndexByte("0123456789abcdef", b[16])%4] // variant 10xx
	return fmt.Sprintf("urn:uuid:%s-%s-%s-%s-%s", b[0:8], b[8:12], b[12:16], b[16:20], b[20:32])
}
