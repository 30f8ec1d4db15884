package manifest

import (
	"fmt"
	"strings"
)

// CompareVersions orders two versions of a package of ecosystem eco: -1, 0 or 1.
//
// It is Debian's algorithm (deb-version(7)), used for every ecosystem: an optional
// numeric epoch ("1:") first; then the rest is compared as alternating runs of
// non-digits (character by character, letters before other characters, "~" before
// everything, even the end) and digits (numerically), so 1.10 > 1.9 and 1.0~rc1 < 1.0.
// Pre-releases of other ecosystems are mapped onto "~" first: npm's "1.0.0-beta.1"
// (build metadata after "+" is dropped) and PyPI's "1.0rc1", "1.0a1", "1.0.dev1" sort
// before "1.0". It is not a full PEP 440 or SemVer implementation: local versions
// ("+local") and PyPI's "post" releases compare as plain suffixes (after the release).
func CompareVersions(eco, a, b string) int {
	a, b = canonicalVersion(eco, a), canonicalVersion(eco, b)
	ea, ra := splitEpoch(a)
	eb, rb := splitEpoch(b)
	if c := cmpNum(ea, eb); c != 0 {
		return c
	}
	return cmpDebian(ra, rb)
}

var pyPre = lazyRegexp(`([0-9])[-_.]?(a|alpha|b|beta|c|rc|pre|preview|dev)([0-9]*)`)

func canonicalVersion(eco, v string) string {
	v = strings.TrimSpace(v)
	switch eco {
	case NPM:
		v = strings.TrimPrefix(v, "v")
		v, _, _ = strings.Cut(v, "+")
		if i := strings.IndexByte(v, '-'); i >= 0 {
			v = v[:i] + "~" + v[i+1:]
		}
	case PyPI:
		v = strings.TrimPrefix(strings.ToLower(v), "v")
		v = pyPre().ReplaceAllString(v, "$1~$2$3")
		if i := strings.IndexByte(v, '!'); i >= 0 { // PEP 440 epoch
			v = v[:i] + ":" + v[i+1:]
		}
	}
	return v
}

func splitEpoch(v string) (string, string) {
	if i := strings.IndexByte(v, ':'); i > 0 && isDigits(v[:i]) {
		return v[:i], v[i+1:]
	}
	return "0", v
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// cmpNum compares two runs of digits numerically, whatever their length.
func cmpNum(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// order is a character's weight in a non-digit run: "~" lowest, then the end of the
// run, then letters, then everything else.
func order(c byte) int {
	switch {
	case c == '~':
		return -1
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	default:
		return int(c) + 256
	}
}

func cmpDebian(a, b string) int {
	for a != "" || b != "" {
		// Non-digit runs.
		na, nb := 0, 0
		for na < len(a) && !isDigit(a[na]) {
			na++
		}
		for nb < len(b) && !isDigit(b[nb]) {
			nb++
		}
		pa, pb := a[:na], b[:nb]
		for i := 0; i < len(pa) || i < len(pb); i++ {
			oa, ob := 0, 0
			if i < len(pa) {
				oa = order(pa[i])
			}
			if i < len(pb) {
				ob = order(pb[i])
			}
			if oa != ob {
				if oa < ob {
					return -1
				}
				return 1
			}
		}
		a, b = a[na:], b[nb:]
		// Digit runs.
		da, db := 0, 0
		for da < len(a) && isDigit(a[da]) {
			da++
		}
		for db < len(b) && isDigit(b[db]) {
			db++
		}
		if c := cmpNum(a[:da], b[:db]); c != 0 {
			return c
		}
		a, b = a[da:], b[db:]
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Query is a parsed advisory query: PACKAGE[@RANGE], optionally prefixed with an
// ecosystem ("pypi:requests@<2.32").
type Query struct {
	Ecosystem string // "" for every ecosystem
	Name      string
	// Constraints must all hold; none means every version.
	Constraints []Constraint
}

// Constraint is one comparison: Op is one of = != < <= > >=.
type Constraint struct {
	Op      string
	Version string
}

// ParseQuery parses PACKAGE[@RANGE]. RANGE is an exact version ("2.31.0"), or
// comma-separated comparisons ("<1.2.3", ">=1.0,<2.0", "==1.0", "!=1.5"). A leading
// "ECOSYSTEM:" (deb, apk, pypi, npm) restricts the ecosystem; PyPI names are
// normalized. A scoped npm name keeps its "@" ("npm:@types/node@<20").
func ParseQuery(s string) (Query, error) {
	var q Query
	s = strings.TrimSpace(s)
	if eco, rest, ok := strings.Cut(s, ":"); ok {
		for _, e := range Ecosystems {
			if eco == e {
				q.Ecosystem, s = e, rest
			}
		}
	}
	name, rng := s, ""
	if i := strings.LastIndexByte(s, '@'); i > 0 {
		name, rng = s[:i], s[i+1:]
	}
	if name == "" {
		return q, fmt.Errorf("package query %q names no package: use NAME[@RANGE], for example pypi:requests@<2.32", s)
	}
	if strings.ContainsAny(name, "<>=!, \t") {
		return q, fmt.Errorf("package query %q: the name %q holds a comparison; put the range after @, for example requests@<2.32", s, name)
	}
	q.Name = name
	if q.Ecosystem == PyPI {
		q.Name = PythonName(name)
	}
	if strings.TrimSpace(rng) == "" {
		return q, nil
	}
	for _, part := range strings.Split(rng, ",") {
		part = strings.TrimSpace(part)
		op := "="
		for _, o := range []string{"<=", ">=", "==", "!=", "<", ">", "="} {
			if strings.HasPrefix(part, o) {
				op, part = o, strings.TrimSpace(part[len(o):])
				break
			}
		}
		if op == "==" {
			op = "="
		}
		if part == "" {
			return q, fmt.Errorf("version range %q has a comparison without a version: use for example >=1.0,<2.0", rng)
		}
		q.Constraints = append(q.Constraints, Constraint{Op: op, Version: part})
	}
	return q, nil
}

// Matches reports whether package p is one the query names, at a version in its range.
func (q Query) Matches(p Package) bool {
	if q.Ecosystem != "" && p.Ecosystem != q.Ecosystem {
		return false
	}
	name := q.Name
	if p.Ecosystem == PyPI {
		name = PythonName(name)
	}
	if p.Name != name {
		return false
	}
	for _, c := range q.Constraints {
		r := CompareVersions(p.Ecosystem, p.Version, c.Version)
		ok := false
		switch c.Op {
		case "=":
			ok = r == 0
		case "!=":
			ok = r != 0
		case "<":
			ok = r < 0
		case "<=":
			ok = r <= 0
		case ">":
			ok = r > 0
		case ">=":
			ok = r >= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// String spells the query back.
func (q Query) String() string {
	s := q.Name
	if q.Ecosystem != "" {
		s = q.Ecosystem + ":" + s
	}
	var cs []string
	for _, c := range q.Constraints {
		cs = append(cs, c.Op+c.Version)
	}
	if len(cs) > 0 {
		s += "@" + strings.Join(cs, ",")
	}
	return s
}
