package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"sync"
)

// Where Extract and ReaderScript look, as fs.Glob patterns relative to the root. Only
// these places are read: a package installed elsewhere (a virtual environment in a
// project folder, a vendored node_modules deeper down) is not in the manifest.
var (
	osReleaseFiles = []string{"etc/os-release", "usr/lib/os-release"}
	dpkgFiles      = []string{"var/lib/dpkg/status", "var/lib/dpkg/status.d/*"}
	apkFiles       = []string{"lib/apk/db/installed"}
	// pythonDirs are site-packages and dist-packages of every python: the system's,
	// /usr/local's (pip as root), /opt's (bundled interpreters and virtual
	// environments), and the user sites of root, /home/* and the sandbox user
	// (/workspace is its home).
	pythonDirs = []string{
		"usr/lib/python*/site-packages", "usr/lib/python*/dist-packages", "usr/lib/python3/dist-packages",
		"usr/local/lib/python*/site-packages", "usr/local/lib/python*/dist-packages",
		"opt/*/lib/python*/site-packages", "opt/*/*/lib/python*/site-packages",
		"root/.local/lib/python*/site-packages", "home/*/.local/lib/python*/site-packages",
		"workspace/.local/lib/python*/site-packages", "workspace/.venv/lib/python*/site-packages",
	}
	// nodeDirs are global node_modules folders and the top level of a project's.
	nodeDirs = []string{
		"usr/lib/node_modules", "usr/local/lib/node_modules", "opt/*/node_modules", "srv/*/node_modules",
		"root/node_modules", "home/*/node_modules", "workspace/node_modules", "app/node_modules",
	}
)

// maxFileBytes bounds what is read of one database file; a larger dpkg status is cut
// there (its stanzas beyond are not read).
const maxFileBytes = 32 << 20

// maxHeaderBytes bounds what is read of one METADATA, PKG-INFO or package.json.
const maxHeaderBytes = 64 << 10

// Extract reads the package databases of the tree fsys (a snapshot's root, or
// ParseDump's result) and returns its manifest. Files that are missing are skipped;
// files that cannot be parsed contribute what could be read.
func Extract(fsys fs.FS) (Manifest, error) {
	var m Manifest
	for _, f := range osReleaseFiles {
		if b, err := readCapped(fsys, f, maxHeaderBytes); err == nil {
			m.Distro, m.DistroVersion = osRelease(b)
			break
		}
	}
	// A system package database is one file of stanzas; a file read is a source even
	// when it lists nothing.
	for _, db := range []struct {
		files  []string
		stanza func(map[string]string) (Package, bool)
	}{{dpkgFiles, dpkgStanza}, {apkFiles, apkStanza}} {
		for _, f := range globAll(fsys, db.files) {
			b, err := readCapped(fsys, f, maxFileBytes)
			if err != nil {
				continue
			}
			m.Sources = append(m.Sources, f)
			m.Packages = append(m.Packages, parseStanzas(b, db.stanza)...)
		}
	}
	// A language's packages are a directory of them, a source when it holds any.
	for _, lang := range []struct {
		dirs     []string
		packages func(fs.FS, string) []Package
	}{{pythonDirs, pythonPackages}, {nodeDirs, nodePackages}} {
		for _, dir := range globAll(fsys, lang.dirs) {
			if pkgs := lang.packages(fsys, dir); len(pkgs) > 0 {
				m.Sources = append(m.Sources, dir)
				m.Packages = append(m.Packages, pkgs...)
			}
		}
	}
	m.normalize()
	return m, nil
}

// globAll expands patterns, each match once, in order.
func globAll(fsys fs.FS, patterns []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range patterns {
		matches, _ := fs.Glob(fsys, p)
		for _, f := range matches {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

func readCapped(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		return nil, errors.New("not a file")
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// osRelease returns ID and VERSION_ID of an os-release file.
func osRelease(b []byte) (id, version string) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return id, version
}

// parseStanzas splits an RFC 822-like database (blank-line separated stanzas of
// "Field: value" lines) and turns each stanza into a package with fn.
func parseStanzas(b []byte, fn func(map[string]string) (Package, bool)) []Package {
	var out []Package
	fields := map[string]string{}
	flush := func() {
		if len(fields) > 0 {
			if p, ok := fn(fields); ok {
				out = append(out, p)
			}
			fields = map[string]string{}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation line (descriptions, file lists)
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}

// dpkgStanza keeps a package whose status says it is installed (a stanza without a
// Status field, as distroless images write into status.d, counts as installed).
func dpkgStanza(f map[string]string) (Package, bool) {
	name, ver := f["Package"], f["Version"]
	if name == "" || ver == "" {
		return Package{}, false
	}
	if st, ok := f["Status"]; ok {
		words := strings.Fields(st)
		if len(words) != 3 || words[2] != "installed" {
			return Package{}, false
		}
	}
	return Package{Ecosystem: Deb, Name: name, Version: ver, Arch: f["Architecture"]}, true
}

// apkStanza reads apk's one-letter fields: P name, V version, A architecture.
func apkStanza(f map[string]string) (Package, bool) {
	if f["P"] == "" || f["V"] == "" {
		return Package{}, false
	}
	return Package{Ecosystem: APK, Name: f["P"], Version: f["V"], Arch: f["A"]}, true
}

var pyNameRun = lazyRegexp(`[-_.]+`)

// PythonName is a distribution name normalized as PEP 503 says: lower case, runs of
// "-", "_" and "." as one "-".
func PythonName(n string) string { return pyNameRun().ReplaceAllString(strings.ToLower(n), "-") }

// pythonPackages reads the distributions installed in one site-packages folder.
func pythonPackages(fsys fs.FS, dir string) []Package {
	var out []Package
	for _, pat := range []string{"*.dist-info", "*.egg-info"} {
		matches, _ := fs.Glob(fsys, path.Join(dir, pat))
		for _, md := range matches {
			meta := md
			if st, err := fs.Stat(fsys, md); err == nil && st.IsDir() {
				if strings.HasSuffix(md, ".dist-info") {
					meta = path.Join(md, "METADATA")
				} else {
					meta = path.Join(md, "PKG-INFO")
				}
			}
			name, ver := "", ""
			if b, err := readCapped(fsys, meta, maxHeaderBytes); err == nil {
				name, ver = metadataHeader(b)
			}
			if name == "" || ver == "" {
				// The folder's name says it too: name-version.dist-info,
				// name-version[-pyX.Y].egg-info.
				n, v := distFromDirName(path.Base(md))
				if name == "" {
					name = n
				}
				if ver == "" {
					ver = v
				}
			}
			if name != "" && ver != "" {
				out = append(out, Package{Ecosystem: PyPI, Name: PythonName(name), Version: ver})
			}
		}
	}
	return out
}

// metadataHeader reads Name and Version from the header of a core metadata file (it
// ends at the first blank line).
func metadataHeader(b []byte) (name, version string) {
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Name":
			if name == "" {
				name = strings.TrimSpace(v)
			}
		case "Version":
			if version == "" {
				version = strings.TrimSpace(v)
			}
		}
	}
	return name, version
}

func distFromDirName(base string) (name, version string) {
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".dist-info"), ".egg-info")
	parts := strings.Split(base, "-")
	if len(parts) < 2 {
		return "", ""
	}
	return parts[0], parts[1]
}

// nodePackages reads the top-level packages of one node_modules folder (scoped ones
// included).
func nodePackages(fsys fs.FS, dir string) []Package {
	var out []Package
	for _, pat := range []string{"*/package.json", "@*/*/package.json"} {
		matches, _ := fs.Glob(fsys, path.Join(dir, pat))
		for _, pj := range matches {
			b, err := readCapped(fsys, pj, maxHeaderBytes)
			if err != nil {
				continue
			}
			name, ver := packageJSON(b)
			if name == "" {
				rel := strings.TrimPrefix(path.Dir(pj), dir+"/")
				name = rel
			}
			if ver != "" {
				out = append(out, Package{Ecosystem: NPM, Name: name, Version: ver})
			}
		}
	}
	return out
}

var (
	jsonName    = lazyRegexp(`"name"\s*:\s*"([^"]*)"`)
	jsonVersion = lazyRegexp(`"version"\s*:\s*"([^"]*)"`)
)

// packageJSON reads name and version of a package.json; one cut at maxHeaderBytes is
// read with a pattern instead (the first "name" and "version" keys).
func packageJSON(b []byte) (name, version string) {
	var pj struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pj) == nil {
		return pj.Name, pj.Version
	}
	if m := jsonName().FindSubmatch(b); m != nil {
		name = string(m[1])
	}
	if m := jsonVersion().FindSubmatch(b); m != nil {
		version = string(m[1])
	}
	return name, version
}

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
