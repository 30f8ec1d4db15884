package daytona

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// manifestTimeout bounds the reader's run in the short-lived sandbox.
const manifestTimeout = 2 * time.Minute

// manifestOutputCap bounds what the reader's output may be (the databases, cut to the
// fields the manifest reads, are far smaller).
const manifestOutputCap = 32 << 20

// Manifest says what snapshot id contains (builds.Manifester): Daytona snapshots are
// images on Daytona's side, so a short-lived sandbox of the snapshot (no network, the
// label LabelPurpose=manifest) runs manifest.ReaderScript, and the sandbox is deleted
// whatever happens.
func (b *Builder) Manifest(ctx context.Context, id string) (manifest.Manifest, error) {
	m, err := b.manifest(ctx, id)
	if err != nil {
		return m, fmt.Errorf("daytona: manifest of snapshot %s: %w", id, err)
	}
	return m, nil
}

// LabelPurpose marks sandboxes trueforge makes for its own use, not for a session.
const LabelPurpose = "trueforge.purpose"

func (b *Builder) manifest(ctx context.Context, id string) (manifest.Manifest, error) {
	// The reader needs no workspace: /tmp is one every image has (and the emulator's
	// sandboxes, which serve only /workspace to file calls, let a command use).
	rt := &Runtime{C: b.C, WorkDir: "/tmp"}
	name := "trueforge-manifest-" + randHex()
	err := rt.Create(ctx, sandbox.CreateRequest{ID: name, SnapshotID: id, BlockNetwork: true,
		Labels: map[string]string{LabelPurpose: "manifest"}})
	defer func() { _ = rt.Delete(context.WithoutCancel(ctx), name) }()
	if err != nil {
		return manifest.Manifest{}, err
	}
	res, err := rt.Exec(ctx, name, sandbox.ExecRequest{Shell: manifest.ReaderScript, Timeout: manifestTimeout, OutputCap: manifestOutputCap})
	if err != nil {
		return manifest.Manifest{}, err
	}
	if res.ExitCode != 0 || res.Truncated {
		return manifest.Manifest{}, fmt.Errorf("the package reader exited %d (output truncated: %v): %s", res.ExitCode, res.Truncated, bytes.TrimSpace(res.Stderr))
	}
	return manifest.ExtractDump(bytes.NewReader(res.Stdout))
}
