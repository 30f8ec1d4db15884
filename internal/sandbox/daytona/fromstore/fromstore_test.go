package fromstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/fromstore"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// TestRuntimeFromStore stores a provider with a key sealed as the Terraform provider
// seals it, opens its runtime, and runs a command in a sandbox on the emulator.
func TestRuntimeFromStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := daytonatest.NewServer(t)
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "trueforge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal([]byte(daytonatest.DefaultKey), "sandbox_provider/dt")
	if err != nil {
		t.Fatal(err)
	}
	p := store.SandboxProvider{Name: "dt", Type: "daytona", APIURL: srv.URL(), APIKeyEnc: sealed, Owner: "alice", Status: "Ready"}

	c, err := fromstore.Client(st, p, daytona.WithPollInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	b := daytona.NewBuilder(c)
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage}
	id := sandbox.SnapshotID(spec.BuildHash())
	if err := b.StartBuild(ctx, sandbox.BuildRequest{ID: id, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.WaitSnapshot(ctx, id); err != nil || s.State != daytona.SnapshotActive {
		t.Fatalf("snapshot: %+v %v", s, err)
	}

	rt, err := fromstore.Runtime(ctx, st, p)
	if err != nil {
		t.Fatal(err)
	}
	drt := rt.(*daytona.Runtime)
	drt.WorkDir = "/workspace" // the emulator's local sandboxes serve /workspace
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "s1", SnapshotID: id}); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(context.Background(), "s1")
	res, err := rt.Exec(ctx, "s1", sandbox.ExecRequest{Shell: "echo ok"})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("exec: %q %v", res.Stdout, err)
	}
	sb, err := c.GetSandbox(ctx, "s1")
	if err != nil || sb.Labels[fromstore.LabelPlane] != fromstore.PlaneLabel(st) {
		t.Fatalf("plane label: %v %v", sb.Labels, err)
	}

	// A key that does not open is a clear error, not a call with garbage.
	p.APIKeyEnc = []byte("not sealed")
	if _, err := fromstore.Runtime(ctx, st, p); err == nil {
		t.Fatal("opened a provider whose key does not open")
	}
	p.Type = "local"
	if _, err := fromstore.Client(st, p); err == nil {
		t.Fatal("opened a local provider as daytona")
	}
}
