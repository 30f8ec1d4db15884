package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pinnedInstall leaves what pip and dpkg leave for one pinned package each (builds here
// have no network, so the package managers cannot fetch).
const pinnedInstall = `
mkdir -p /usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info /var/lib/dpkg/status.d
printf 'Metadata-Version: 2.1\nName: pinned_pkg\nVersion: 1.2.3\n' > /usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info/METADATA
printf 'Package: trueforge-demo\nVersion: 0.9-1\nArchitecture: all\n' > /var/lib/dpkg/status.d/trueforge-demo
`

// A build that installs a pinned package records it in its snapshot's manifest; an
// artifact of a session on that snapshot carries the manifest's digest and what the
// session installed itself; the advisory query finds the snapshot, the environment, the
// session and the artifact, both through the snapshot and through the session install.
func TestSupplyChainLineageAndAffected(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := env.Store
	prov, err := st.GetSandboxProvider(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	be, err := backends.Default().Get("local")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := controlplane.New(st).Provider(ctx, prov)
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.Builder(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	coord := &builds.Coordinator{Store: st, Builder: b, Provider: "local"}
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: pinnedInstall, CPU: 1, MemoryGB: 1, DiskGB: 3}
	snap, err := coord.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: env.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = coord.Wait(ctx, snap.ID); err != nil || snap.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v %v", snap, err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	if err := st.CreateEnvironment(ctx, store.Environment{ID: "env-pinned", Name: "pinned", Provider: "local", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: spec.BuildHash(), SnapshotID: snap.ID}); err != nil {
		t.Fatal(err)
	}
	sm, err := st.GetSnapshotManifest(ctx, snap.ID)
	if err != nil {
		t.Fatalf("no manifest recorded after the build: %v", err)
	}

	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, st, "installer", "pinned", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("exec", map[string]any{"command": `d=/workspace/.local/lib/python3.11/site-packages/evil_dep-0.1.dist-info; mkdir -p $d && printf 'Name: evil-dep\nVersion: 0.1\n' > $d/METADATA && echo made > report.txt && echo two > other.txt`}),
			call("offer_artifact", map[string]any{"path": "report.txt"}),
			call("offer_artifact", map[string]any{"path": "other.txt"}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("pinned", 15, 60, 120),
	})
	if _, errOut, err := run(t, st.Path(), "", "run", "installer", "go"); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	ss, _ := st.ListSessions(ctx, "", "installer")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	sid := ss[0].ID

	out, _, err := run(t, st.Path(), "", "files", "list", sid, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var files filesJSON
	if err := json.Unmarshal([]byte(out), &files); err != nil || len(files.Offered) != 2 {
		t.Fatalf("files list: %v\n%s", err, out)
	}
	for _, f := range files.Offered {
		if f.ManifestDigest != sm.Digest {
			t.Errorf("%s: manifest digest %q, want the snapshot's %q", f.Path, f.ManifestDigest, sm.Digest)
		}
		if len(f.SessionInstalls) != 1 || f.SessionInstalls[0].Name != "evil-dep" || f.SessionInstalls[0].Version != "0.1" {
			t.Errorf("%s: session installs %+v, want [pypi evil-dep 0.1]", f.Path, f.SessionInstalls)
		}
	}
	if out, _, err = run(t, st.Path(), "", "files", "list", sid); err != nil || !strings.Contains(out, "pypi:evil-dep@0.1") || !strings.Contains(out, sm.Digest[:19]) {
		t.Errorf("files list table lacks the lineage: %v\n%s", err, out)
	}

	if out, _, err = run(t, st.Path(), "", "snapshots", "show", "pinned"); err != nil || !strings.Contains(out, sm.Digest) ||
		!strings.Contains(out, "pinned-pkg") || !strings.Contains(out, "trueforge-demo") {
		t.Errorf("snapshots show: %v\n%s", err, out)
	}
	if out, _, err = run(t, st.Path(), "", "snapshots", "show", snap.ID, "--sbom"); err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat, SpecVersion string
		Components             []struct{ PURL string }
	}
	if err := json.Unmarshal([]byte(out), &bom); err != nil || bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" || len(bom.Components) != sm.Packages {
		t.Errorf("sbom: %v %+v", err, bom.BOMFormat)
	}

	affected := func(q string) affectedJSON {
		t.Helper()
		out, _, err := run(t, st.Path(), "", "snapshots", "affected", q, "-o", "json")
		if err != nil {
			t.Fatalf("affected %s: %v", q, err)
		}
		var doc affectedJSON
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	doc := affected("pypi:pinned_pkg@<2")
	if len(doc.Snapshots) != 1 || doc.Snapshots[0].ID != snap.ID {
		t.Errorf("snapshots = %+v", doc.Snapshots)
	}
	if len(doc.Environments) != 1 || doc.Environments[0].Name != "pinned" {
		t.Errorf("environments = %+v", doc.Environments)
	}
	if len(doc.Sessions) != 1 || doc.Sessions[0].ID != sid || doc.Sessions[0].Via != "snapshot" {
		t.Errorf("sessions = %+v", doc.Sessions)
	}
	if len(doc.Artifacts) != 2 || doc.Artifacts[0].Path != "report.txt" || doc.Artifacts[0].Via != "snapshot" {
		t.Errorf("artifacts = %+v", doc.Artifacts)
	}
	doc = affected("evil-dep@0.1")
	if len(doc.Snapshots) != 0 || len(doc.Artifacts) != 2 || doc.Artifacts[0].Via != "session install" || len(doc.Sessions) != 1 {
		t.Errorf("a session install is not found: %+v", doc)
	}
	if doc = affected("pypi:pinned-pkg@>=2"); len(doc.Snapshots)+len(doc.Artifacts) != 0 {
		t.Errorf("a range outside the installed version matched: %+v", doc)
	}
	// Another user sees the shared snapshot and environment, not this user's work,
	// unless asking for every owner's.
	out, _, err = run(t, st.Path(), "", "--owner", "mallory", "snapshots", "affected", "pinned-pkg", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var other affectedJSON
	if err := json.Unmarshal([]byte(out), &other); err != nil || len(other.Snapshots) != 1 || len(other.Sessions)+len(other.Artifacts) != 0 {
		t.Errorf("another owner's view: %v %+v", err, other)
	}
	out, _, err = run(t, st.Path(), "", "--owner", "mallory", "snapshots", "affected", "pinned-pkg", "--all-owners", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &other) != nil || len(other.Sessions) != 1 || len(other.Artifacts) != 2 {
		t.Errorf("--all-owners: %v %+v", err, other)
	}
	if _, _, err := run(t, st.Path(), "", "snapshots", "affected", "pinned-pkg@>=1,<"); err == nil || !strings.Contains(err.Error(), "without a version") {
		t.Errorf("a bad range: %v", err)
	}
}
