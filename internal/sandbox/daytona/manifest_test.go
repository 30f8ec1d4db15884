package daytona_test

import (
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// The manifest of a Daytona snapshot is read by the reader in a short-lived sandbox of
// it, which is gone afterwards. (The emulator runs every sandbox on the host's platform
// image, so it finds the Python distributions of the host's /usr.)
func TestManifestRunsTheReaderInAShortLivedSandbox(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	id := readySnapshot(t, ctx, c, "echo hi")
	b := daytona.NewBuilder(c)
	m, err := b.Manifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := manifest.Extract(hostRoot{})
	if err != nil {
		t.Fatal(err)
	}
	if want.Counts()[manifest.PyPI] > 0 && m.Counts()[manifest.PyPI] != want.Counts()[manifest.PyPI] {
		t.Errorf("pypi packages in the snapshot = %d, want the host /usr's %d (sources %v)", m.Counts()[manifest.PyPI], want.Counts()[manifest.PyPI], m.Sources)
	}
	left, err := daytona.NewRuntime(c).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("sandboxes left after the manifest: %+v", left)
	}
	if _, err := b.Manifest(ctx, "snap-missing"); err == nil {
		t.Error("the manifest of a missing snapshot was taken")
	}
}
