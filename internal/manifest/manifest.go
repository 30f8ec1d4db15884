// Package manifest describes what a snapshot contains: the packages its package
// databases list (Debian's dpkg, Alpine's apk), the Python distributions and the Node
// packages installed in it. It reads those databases as files, never by running a
// package manager, so that the same reader works on a snapshot's layers on this machine
// (Extract over an fs.FS) and inside a running sandbox of any backend (ReaderScript,
// whose output ParseDump turns back into an fs.FS).
//
// A Manifest is deterministic (sorted, deduplicated), bounded (MaxBytes of canonical
// JSON; the packages beyond are dropped and counted) and named by its Digest, the
// SHA-256 of its canonical JSON. CycloneDX exports it as a CycloneDX 1.5 SBOM.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// Ecosystems a manifest records, as they appear in Package.Ecosystem.
const (
	Deb  = "deb"  // Debian/Ubuntu packages (dpkg status database)
	APK  = "apk"  // Alpine packages (apk installed database)
	PyPI = "pypi" // Python distributions (*.dist-info, *.egg-info)
	NPM  = "npm"  // Node packages (node_modules/*/package.json)
)

// Ecosystems lists every ecosystem Extract reads, in the order they sort.
var Ecosystems = []string{APK, Deb, NPM, PyPI}

// FormatVersion is the version of the manifest document's layout; it is part of the
// canonical JSON and so of the digest.
const FormatVersion = 1

// MaxBytes bounds a manifest's canonical JSON. Packages beyond it (in sorted order) are
// left out, and Omitted counts them.
const MaxBytes = 4 << 20

// Package is one installed package.
type Package struct {
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Arch is the package's architecture (deb, apk), "" when it has none.
	Arch string `json:"arch,omitempty"`
}

// Key identifies a package version within an ecosystem.
func (p Package) Key() string {
	return p.Ecosystem + "\x00" + p.Name + "\x00" + p.Version + "\x00" + p.Arch
}

// Manifest is what a snapshot (or a running sandbox) contains.
type Manifest struct {
	V int `json:"v"`
	// Distro is the ID of /etc/os-release (debian, ubuntu, alpine, ...) and
	// DistroVersion its VERSION_ID: they qualify deb and apk package URLs.
	Distro        string `json:"distro,omitempty"`
	DistroVersion string `json:"distro_version,omitempty"`
	// Sources are the databases that were read (paths inside the snapshot), sorted.
	Sources  []string  `json:"sources"`
	Packages []Package `json:"packages"`
	// Omitted counts the packages left out to keep the document within MaxBytes.
	Omitted int `json:"omitted,omitempty"`
}

// Truncated reports whether packages were left out to respect MaxBytes.
func (m Manifest) Truncated() bool { return m.Omitted > 0 }

// Counts returns how many packages each ecosystem has.
func (m Manifest) Counts() map[string]int {
	c := map[string]int{}
	for _, p := range m.Packages {
		c[p.Ecosystem]++
	}
	return c
}

// normalize sorts and deduplicates the packages and sources and applies MaxBytes.
func (m *Manifest) normalize() {
	m.V = FormatVersion
	sort.Slice(m.Packages, func(i, j int) bool {
		a, b := m.Packages[i], m.Packages[j]
		if a.Ecosystem != b.Ecosystem {
			return a.Ecosystem < b.Ecosystem
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Arch < b.Arch
	})
	out := m.Packages[:0]
	for i, p := range m.Packages {
		if i > 0 && p == m.Packages[i-1] {
			continue
		}
		out = append(out, p)
	}
	m.Packages = out
	sort.Strings(m.Sources)
	m.Sources = dedupe(m.Sources)
	if m.Sources == nil {
		m.Sources = []string{}
	}
	if m.Packages == nil {
		m.Packages = []Package{}
	}
	// Cut from the end until the document fits: the size of each package's encoding
	// (plus its comma) is what it adds.
	size := len(m.canonical())
	for size > MaxBytes && len(m.Packages) > 0 {
		last := m.Packages[len(m.Packages)-1]
		b, _ := json.Marshal(last)
		size -= len(b) + 1
		m.Packages = m.Packages[:len(m.Packages)-1]
		m.Omitted++
	}
	// The count of omitted packages itself takes room: cut on until it fits.
	for len(m.Packages) > 0 && len(m.canonical()) > MaxBytes {
		m.Packages = m.Packages[:len(m.Packages)-1]
		m.Omitted++
	}
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i > 0 && v == s[i-1] {
			continue
		}
		out = append(out, v)
	}
	return out
}

// canonical is the manifest's JSON encoding: fields in declaration order, packages
// sorted, no insignificant space, no HTML escaping.
func (m Manifest) canonical() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// JSON is the manifest's canonical JSON, the bytes its Digest is taken of.
func (m Manifest) JSON() []byte { return m.canonical() }

// Digest is "sha256:" and the hex SHA-256 of the canonical JSON.
func (m Manifest) Digest() string {
	sum := sha256.Sum256(m.canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Parse reads a manifest's JSON (as JSON returns it).
func Parse(b []byte) (Manifest, error) {
	var m Manifest
	err := json.Unmarshal(b, &m)
	return m, err
}

// Diff returns the packages of b that a does not have (same ecosystem, name, version
// and architecture): what was installed or upgraded between a and b. Packages of a that
// b lacks (removed) are returned apart.
func Diff(a, b Manifest) (added, removed []Package) {
	in := func(m Manifest) map[string]bool {
		s := make(map[string]bool, len(m.Packages))
		for _, p := range m.Packages {
			s[p.Key()] = true
		}
		return s
	}
	ina, inb := in(a), in(b)
	for _, p := range b.Packages {
		if !ina[p.Key()] {
			added = append(added, p)
		}
	}
	for _, p := range a.Packages {
		if !inb[p.Key()] {
			removed = append(removed, p)
		}
	}
	return added, removed
}
