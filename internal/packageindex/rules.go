package packageindex

import (
	"slices"
)

// The rules below turn an environment's network settings into the allow lists its
// sandboxes and its snapshot builds get. They keep allow_domains' meaning: an empty
// allow_domains admits every public host, so naming package indexes never narrows an
// environment that had no allow list (its sandboxes and builds reach the indexes
// already); it widens a non-empty one by the indexes' hosts, where they apply.

// SandboxAllow is the allow list of a sandbox of an environment whose allow_domains is
// allow, whose allow_cidrs is cidrs, and whose package indexes are names, reachable in in
// (InBuild, InBuildAndSandbox, or "" for DefaultIn): allow, plus the indexes' hosts when
// in is InBuildAndSandbox and the sandbox is restricted at all (allow or cidrs is not
// empty: an address range alone limits a sandbox to that range). An empty result with
// no cidrs admits every public host, as allow_domains does; block_all is the caller's,
// and wins over both.
func SandboxAllow(allow, cidrs, names []string, in string) ([]string, error) {
	if in == "" {
		in = DefaultIn
	}
	hosts, err := Hosts(names)
	if err != nil {
		return nil, err
	}
	if in != InBuildAndSandbox || (len(allow) == 0 && len(cidrs) == 0) || len(hosts) == 0 {
		return allow, nil
	}
	return union(allow, hosts), nil
}

// BuildNetwork is the network of a snapshot build of an environment: blocked (block),
// through an egress proxy that admits only hosts (proxied), or neither (every public
// host; the local backend still proxies such a build, never giving it the host's network).
//
//   - block_all with no package index: blocked, as before.
//   - block_all with package indexes: proxied, the indexes' hosts alone. block_all keeps
//     its meaning for sandboxes; a build may still fetch the packages it pins.
//   - a non-empty allow_domains: proxied, allow_domains plus the indexes' hosts, in both
//     package_indexes_in modes (the indexes always apply to builds).
//   - an empty allow_domains: neither; every public host is allowed, the indexes' too.
func BuildNetwork(blockAll bool, allow, names []string) (block, proxied bool, hosts []string, err error) {
	idx, err := Hosts(names)
	if err != nil {
		return false, false, nil, err
	}
	switch {
	case blockAll && len(idx) == 0:
		return true, false, nil, nil
	case blockAll:
		return false, true, idx, nil
	case len(allow) > 0:
		return false, true, union(allow, idx), nil
	}
	return false, false, nil, nil
}

// union is a followed by the entries of b it lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, h := range b {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
