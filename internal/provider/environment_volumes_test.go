package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The checks of an environment's volumes and registry name the attribute at fault:
// volumes[i].volume for a missing volume or one of another provider (a warning at
// plan for a missing one, which the same apply may create), registry for a registry,
// and image for an image of another host than the registry's.
func TestEnvironmentRefsNameTheAttribute(t *testing.T) {
	f := newFixture(t)
	cp, _ := f.controlPlane()
	ctx := t.Context()
	st := cp.store
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A Daytona provider: which images a registry serves is its backend's rule.
	must(st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "dt", Type: "daytona", Status: "Ready", Owner: "alice"}))
	must(st.CreateVolume(ctx, store.Volume{Name: "cache", Provider: "dt", Owner: "alice", RemoteID: "cache"}))
	must(st.CreateRegistry(ctx, store.Registry{Name: "ghcr", Provider: "dt", Owner: "alice", URL: "https://ghcr.io", Username: "u", PasswordEnc: []byte("x")}))

	vols := []store.EnvironmentVolume{{Volume: "cache", MountPath: "/a"}, {Volume: "nope", MountPath: "/b"}}
	at := path.Root("volumes").AtListIndex(1).AtName("volume")
	expectOne(t, "apply, missing volume", cp.checkVolumes(ctx, "dt", vols), at, diag.SeverityError, "Volume Not Found")
	expectOne(t, "plan, missing volume", cp.planVolumes(ctx, "dt", vols), at, diag.SeverityWarning, "Volume Not Found")
	expectOne(t, "another provider", cp.checkVolumes(ctx, "daytona", vols[:1]), path.Root("volumes").AtListIndex(0).AtName("volume"), diag.SeverityError, "Volume Of Another Sandbox Provider")
	if d := cp.checkVolumes(ctx, "dt", vols[:1]); d.HasError() || len(d) != 0 {
		t.Errorf("an existing volume of the provider: %v", d)
	}

	expectOne(t, "missing registry", cp.checkRegistry(ctx, "dt", "nope", "", false), path.Root("registry"), diag.SeverityError, "Registry Not Found")
	expectOne(t, "image of another host", cp.checkRegistry(ctx, "dt", "ghcr", "python:3.12", false), path.Root("image"), diag.SeverityError, "Image Not From Registry")
	if d := cp.checkRegistry(ctx, "dt", "ghcr", "ghcr.io/acme/agent:1", false); len(d) != 0 {
		t.Errorf("an image of the registry's host: %v", d)
	}
}

func expectOne(t *testing.T, what string, d diag.Diagnostics, at path.Path, sev diag.Severity, summary string) {
	t.Helper()
	if len(d) != 1 {
		t.Fatalf("%s: %d diagnostics %v; want one", what, len(d), d)
	}
	wp, ok := d[0].(diag.DiagnosticWithPath)
	if !ok || !wp.Path().Equal(at) || d[0].Severity() != sev || d[0].Summary() != summary {
		t.Fatalf("%s: %v; want %s %q at %s", what, d[0], sev, summary, at)
	}
}
