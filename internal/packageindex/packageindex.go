// Package packageindex names the public package indexes an environment may allow
// (network.package_indexes) and the hosts each one needs, so that a team allows
// installing packages without spelling, or over-broadening, the hosts by hand.
package packageindex

import (
	"fmt"
	"sort"
	"strings"
)

// Where package indexes are reachable from (network.package_indexes_in).
const (
	// InBuild: only snapshot builds reach the indexes; sandboxes do not.
	InBuild = "build"
	// InBuildAndSandbox: builds and sandboxes both reach them.
	InBuildAndSandbox = "build_and_sandbox"
	// DefaultIn is the safer of the two: packages are installed at build time, pinned in
	// the snapshot, and a sandbox cannot fetch more.
	DefaultIn = InBuild
)

// indexes maps each named index to the hosts its clients fetch from: the index itself
// and the file hosts its packages are served from.
var indexes = map[string][]string{
	"pypi":   {"pypi.org", "files.pythonhosted.org"},
	"npm":    {"registry.npmjs.org"},
	"debian": {"deb.debian.org", "security.debian.org"},
	"go":     {"proxy.golang.org", "sum.golang.org"},
	"crates": {"index.crates.io", "static.crates.io", "crates.io"},
}

// Names lists the known index names in order.
func Names() []string {
	out := make([]string, 0, len(indexes))
	for n := range indexes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a known index.
func Known(name string) bool { _, ok := indexes[name]; return ok }

// Hosts expands names to their hosts, sorted and without duplicates. An unknown name is
// an error that lists the known ones.
func Hosts(names []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		hosts, ok := indexes[n]
		if !ok {
			return nil, fmt.Errorf("unknown package index %q: use one of %s", n, strings.Join(Names(), ", "))
		}
		for _, h := range hosts {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
