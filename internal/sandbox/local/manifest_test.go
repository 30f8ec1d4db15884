package local

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// installScript leaves what pip, dpkg and npm leave for one pinned package each: a
// dist-info folder, a status.d stanza, a package.json. (Builds here have no network, so
// the package managers themselves cannot fetch anything.)
const installScript = `
mkdir -p /usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info /var/lib/dpkg/status.d /usr/local/lib/node_modules/left-pad
printf 'Metadata-Version: 2.1\nName: pinned_pkg\nVersion: 1.2.3\n\nlong description\n' > /usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info/METADATA
printf 'Package: trueforge-demo\nVersion: 1:0.9~rc1-2\nArchitecture: all\n' > /var/lib/dpkg/status.d/trueforge-demo
printf '{"name": "left-pad", "version": "1.3.0"}' > /usr/local/lib/node_modules/left-pad/package.json
`

func has(m manifest.Manifest, p manifest.Package) bool {
	for _, q := range m.Packages {
		if q == p {
			return true
		}
	}
	return false
}

var (
	pinned  = manifest.Package{Ecosystem: manifest.PyPI, Name: "pinned-pkg", Version: "1.2.3"}
	demoDeb = manifest.Package{Ecosystem: manifest.Deb, Name: "trueforge-demo", Version: "1:0.9~rc1-2", Arch: "all"}
	leftPad = manifest.Package{Ecosystem: manifest.NPM, Name: "left-pad", Version: "1.3.0"}
)

// The manifest of a built snapshot lists what its build installed, read from the
// layers without a sandbox; a child that removes a package (a whiteout) no longer lists
// it; the host's package database stands for the platform image's /usr.
func TestManifestReadsLayers(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-pkgs", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: installScript}})
	requireReady(t, waitDone(t, b, "snap-pkgs", 30*time.Second))
	start := time.Now()
	m, err := b.Manifest(context.Background(), "snap-pkgs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest: %d packages, %d bytes, taken in %s", len(m.Packages), len(m.JSON()), time.Since(start))
	for _, p := range []manifest.Package{pinned, demoDeb, leftPad} {
		if !has(m, p) {
			t.Errorf("manifest lacks %+v; sources %v", p, m.Sources)
		}
	}
	if _, err := os.Stat("/var/lib/dpkg/status"); err == nil && m.Counts()[manifest.Deb] < 2 {
		t.Errorf("the host's dpkg database was not read below the layers: %v", m.Counts())
	}
	relM, err := b.Manifest(context.Background(), rel)
	if err != nil || has(relM, pinned) {
		t.Fatalf("the release lists the build's package: %v", err)
	}

	startBuild(t, b, sandbox.BuildRequest{ID: "snap-pkgs-rm", Base: "snap-pkgs", Spec: sandbox.SnapshotSpec{
		BuildScript: "rm -r /usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info /usr/local/lib/node_modules"}})
	requireReady(t, waitDone(t, b, "snap-pkgs-rm", 30*time.Second))
	child, err := b.Manifest(context.Background(), "snap-pkgs-rm")
	if err != nil {
		t.Fatal(err)
	}
	if has(child, pinned) || has(child, leftPad) || !has(child, demoDeb) {
		t.Errorf("after removal: pinned %v, left-pad %v, deb %v; want false, false, true", has(child, pinned), has(child, leftPad), has(child, demoDeb))
	}
}

// The reader run inside a sandbox of the snapshot finds the same packages the layers
// hold, plus what the session installed: the diff is exactly the session's install.
func TestReaderInSandboxDiffsSessionInstalls(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	startBuild(t, r.b, sandbox.BuildRequest{ID: "snap-pkgs-rt", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: installScript}})
	requireReady(t, waitDone(t, r.b, "snap-pkgs-rt", 30*time.Second))
	base, err := r.b.Manifest(context.Background(), "snap-pkgs-rt")
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "sb-pkgs", SnapshotID: "snap-pkgs-rt"})
	sh(t, r, "sb-pkgs", `d=$HOME/.local/lib/python3.11/site-packages/evil_dep-0.1.dist-info; mkdir -p $d && printf 'Name: evil-dep\nVersion: 0.1\n' > $d/METADATA`)
	res := sh(t, r, "sb-pkgs", manifest.ReaderScript)
	if res.ExitCode != 0 {
		t.Fatalf("reader: %d %s", res.ExitCode, res.Stderr)
	}
	live, err := manifest.ExtractDump(bytes.NewReader(res.Stdout))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []manifest.Package{pinned, demoDeb, leftPad} {
		if !has(live, p) {
			t.Errorf("the reader in the sandbox misses %+v", p)
		}
	}
	added, _ := manifest.Diff(base, live)
	want := manifest.Package{Ecosystem: manifest.PyPI, Name: "evil-dep", Version: "0.1"}
	if len(added) != 1 || added[0] != want {
		t.Errorf("session installs = %+v, want [%+v]", added, want)
	}
}
