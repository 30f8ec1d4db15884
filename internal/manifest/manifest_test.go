package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// sampleTree is what package managers leave: a dpkg status with an installed and a
// removed package, a distroless status.d entry, an apk database, Python distributions
// (dist-info, egg-info folder and file) and Node packages (plain and scoped).
func sampleTree() map[string]string {
	return map[string]string{
		"etc/os-release": "PRETTY_NAME=\"Debian GNU/Linux 12\"\nID=debian\nVERSION_ID=\"12\"\n",
		"var/lib/dpkg/status": "Package: curl\nStatus: install ok installed\nArchitecture: amd64\nVersion: 7.88.1-10+deb12u5\nDescription: tool\n more text\n\n" +
			"Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n\n" +
			"Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u4\n",
		"var/lib/dpkg/status.d/tzdata": "Package: tzdata\nVersion: 2024a-0+deb12u1\nArchitecture: all\n",
		"lib/apk/db/installed":         "C:Q1abc\nP:musl\nV:1.2.4-r2\nA:x86_64\n\nP:busybox\nV:1.36.1-r5\nA:x86_64\n",
		"usr/lib/python3/dist-packages/Requests-2.31.0.dist-info/METADATA":         "Metadata-Version: 2.1\nName: Requests\nVersion: 2.31.0\n\nVersion: 9.9 in the body\n",
		"usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info/RECORD": "",
		"usr/local/lib/python3.11/dist-packages/six-1.16.0.egg-info/PKG-INFO":      "Metadata-Version: 1.1\nName: six\nVersion: 1.16.0\n",
		"usr/local/lib/python3.11/dist-packages/old.egg-info":                      "Metadata-Version: 1.0\nName: old_thing\nVersion: 0.1\n",
		"usr/lib/node_modules/npm/package.json":                                    `{"name": "npm", "version": "9.2.0", "dependencies": {"x": "1"}}`,
		"workspace/node_modules/@types/node/package.json":                          `{"name": "@types/node", "version": "20.1.0"}`,
	}
}

var wantSample = []Package{
	{APK, "busybox", "1.36.1-r5", "x86_64"},
	{APK, "musl", "1.2.4-r2", "x86_64"},
	{Deb, "curl", "7.88.1-10+deb12u5", "amd64"},
	{Deb, "libc6", "2.36-9+deb12u4", "amd64"},
	{Deb, "tzdata", "2024a-0+deb12u1", "all"},
	{NPM, "@types/node", "20.1.0", ""},
	{NPM, "npm", "9.2.0", ""},
	{PyPI, "old-thing", "0.1", ""},
	{PyPI, "pinned-pkg", "1.2.3", ""},
	{PyPI, "requests", "2.31.0", ""},
	{PyPI, "six", "1.16.0", ""},
}

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v), Mode: 0o644}
	}
	return m
}

func TestExtractReadsEveryDatabase(t *testing.T) {
	m, err := Extract(mapFS(sampleTree()))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Packages) != len(wantSample) {
		t.Fatalf("packages = %+v\nwant %+v", m.Packages, wantSample)
	}
	for i, p := range wantSample {
		if m.Packages[i] != p {
			t.Errorf("package %d = %+v, want %+v", i, m.Packages[i], p)
		}
	}
	if m.Distro != "debian" || m.DistroVersion != "12" {
		t.Errorf("distro = %q %q", m.Distro, m.DistroVersion)
	}
	if !strings.HasPrefix(m.Digest(), "sha256:") || len(m.Digest()) != 71 {
		t.Errorf("digest = %q", m.Digest())
	}
}

// The same tree read by ReaderScript (with sh, as inside a sandbox) and by Extract on
// the files gives the same manifest, digest included.
func TestReaderScriptMatchesExtract(t *testing.T) {
	root := t.TempDir()
	for p, c := range sampleTree() {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	direct, err := Extract(os.DirFS(root))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", ReaderScript)
	cmd.Env = append(os.Environ(), "TRUEFORGE_MANIFEST_ROOT="+root)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader script: %v", err)
	}
	viaScript, err := ExtractDump(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if direct.Digest() != viaScript.Digest() {
		t.Fatalf("script and files disagree:\nfiles:  %s\nscript: %s", direct.JSON(), viaScript.JSON())
	}
	// The egg-info without PKG-INFO and the dist-info without METADATA are read from
	// their folder names by Extract; the script prints only files, so check both see
	// the dist-info one.
	if len(direct.Packages) < len(wantSample)-1 {
		t.Errorf("direct read found %d packages", len(direct.Packages))
	}
}

func TestManifestIsDeterministicAndBounded(t *testing.T) {
	a, _ := Extract(mapFS(sampleTree()))
	b, _ := Extract(mapFS(sampleTree()))
	if a.Digest() != b.Digest() || string(a.JSON()) != string(b.JSON()) {
		t.Fatal("two extractions of the same tree differ")
	}
	var big Manifest
	for i := range 100000 {
		big.Packages = append(big.Packages, Package{Ecosystem: NPM, Name: fmt.Sprintf("package-with-a-long-name-%06d", i), Version: "1.0.0"})
	}
	big.normalize()
	if n := len(big.JSON()); n > MaxBytes {
		t.Fatalf("manifest is %d bytes, over MaxBytes %d", n, MaxBytes)
	}
	if !big.Truncated() || big.Omitted == 0 {
		t.Fatalf("a manifest over MaxBytes does not record its truncation (omitted %d, %d kept)", big.Omitted, len(big.Packages))
	}
	back, err := Parse(big.JSON())
	if err != nil || back.Digest() != big.Digest() {
		t.Fatalf("parse round trip: %v", err)
	}
}

func TestDiff(t *testing.T) {
	base, _ := Extract(mapFS(sampleTree()))
	tree := sampleTree()
	tree["workspace/.local/lib/python3.11/site-packages/evil-0.1.dist-info/METADATA"] = "Name: evil\nVersion: 0.1\n"
	tree["usr/lib/python3/dist-packages/Requests-2.31.0.dist-info/METADATA"] = "Name: requests\nVersion: 2.32.0\n"
	delete(tree, "lib/apk/db/installed")
	live, _ := Extract(mapFS(tree))
	added, removed := Diff(base, live)
	want := []Package{{PyPI, "evil", "0.1", ""}, {PyPI, "requests", "2.32.0", ""}}
	if len(added) != 2 || added[0] != want[0] || added[1] != want[1] {
		t.Errorf("added = %+v, want %+v", added, want)
	}
	if len(removed) != 3 {
		t.Errorf("removed = %+v, want busybox, musl and requests 2.31.0", removed)
	}
}

func TestCycloneDX(t *testing.T) {
	m, _ := Extract(mapFS(sampleTree()))
	b, err := CycloneDX(m, "snap-123")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Version      int    `json:"version"`
		Metadata     struct {
			Component struct{ Type, Name string }
		}
		Components []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
			BOMRef  string `json:"bom-ref"`
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.5" || doc.Version != 1 || !strings.HasPrefix(doc.SerialNumber, "urn:uuid:") || len(doc.SerialNumber) != 45 {
		t.Fatalf("header = %q %q %d %q", doc.BOMFormat, doc.SpecVersion, doc.Version, doc.SerialNumber)
	}
	if doc.Metadata.Component.Name != "snap-123" || doc.Metadata.Component.Type != "container" {
		t.Errorf("metadata component = %+v", doc.Metadata.Component)
	}
	if len(doc.Components) != len(m.Packages) {
		t.Fatalf("%d components for %d packages", len(doc.Components), len(m.Packages))
	}
	purls := map[string]bool{}
	for _, c := range doc.Components {
		if c.Type != "library" || c.Name == "" || c.Version == "" || c.BOMRef != c.PURL {
			t.Errorf("component %+v", c)
		}
		if purls[c.PURL] {
			t.Errorf("duplicate bom-ref %s", c.PURL)
		}
		purls[c.PURL] = true
	}
	for _, want := range []string{
		"pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5?arch=amd64&distro=debian-12",
		"pkg:apk/debian/musl@1.2.4-r2?arch=x86_64&distro=debian-12",
		"pkg:pypi/requests@2.31.0",
		"pkg:npm/%40types/node@20.1.0",
	} {
		if !purls[want] {
			t.Errorf("no component with purl %s", want)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		eco, a, b string
		want      int
	}{
		{Deb, "1.10", "1.9", 1},
		{Deb, "1.0~rc1", "1.0", -1},
		{Deb, "1:1.0", "2.0", 1},
		{Deb, "2.36-9+deb12u4", "2.36-9+deb12u10", -1},
		{Deb, "1.0a", "1.0+", -1},
		{Deb, "1.0", "1.0", 0},
		{PyPI, "2.32.0", "2.32", 1},
		{PyPI, "2.32.0rc1", "2.32.0", -1},
		{PyPI, "1.0.dev1", "1.0a1", 1}, // roughly: both before 1.0
		{PyPI, "1!0.1", "2.0", 1},
		{NPM, "1.0.0-beta.2", "1.0.0", -1},
		{NPM, "1.0.0+build5", "1.0.0", 0},
		{NPM, "10.0.0", "9.9.9", 1},
	} {
		if got := CompareVersions(c.eco, c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%s, %q, %q) = %d, want %d", c.eco, c.a, c.b, got, c.want)
		}
		if got := CompareVersions(c.eco, c.b, c.a); got != -c.want {
			t.Errorf("CompareVersions(%s, %q, %q) = %d, want %d", c.eco, c.b, c.a, got, -c.want)
		}
	}
}

func TestQuery(t *testing.T) {
	req := Package{Ecosystem: PyPI, Name: "requests", Version: "2.31.0"}
	for _, c := range []struct {
		q    string
		want bool
	}{
		{"requests", true},
		{"pypi:Requests@<2.32", true},
		{"pypi:requests@>=2.32", false},
		{"requests@2.31.0", true},
		{"requests@==2.31", false},
		{"requests@>=1.0,<2.31.1", true},
		{"requests@>=1.0,<2.31", false},
		{"npm:requests", false},
		{"requests@!=2.31.0", false},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			t.Fatalf("ParseQuery(%q): %v", c.q, err)
		}
		if got := q.Matches(req); got != c.want {
			t.Errorf("%q matches requests 2.31.0 = %v, want %v", c.q, got, c.want)
		}
	}
	q, err := ParseQuery("npm:@types/node@<21")
	if err != nil || q.Ecosystem != NPM || q.Name != "@types/node" || len(q.Constraints) != 1 {
		t.Fatalf("scoped npm query = %+v, %v", q, err)
	}
	if _, err := ParseQuery("@<2"); err == nil {
		t.Error("a query without a name parsed")
	}
	if _, err := ParseQuery("x@>=1,<"); err == nil {
		t.Error("a comparison without a version parsed")
	}
}
