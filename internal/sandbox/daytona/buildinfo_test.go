package daytona_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// specReq is the build request of spec (its content-addressed id), with contextDir.
func specReq(spec sandbox.SnapshotSpec, contextDir string) sandbox.BuildRequest {
	return sandbox.BuildRequest{ID: sandbox.SnapshotID(spec.BuildHash()), Spec: spec, Base: "release", ContextDir: contextDir}
}

// writeContext writes files into a new folder and returns it with its content hash.
func writeContext(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bc, err := sandbox.ReadBuildContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, bc.Hash
}

// TestBuildCarriesGPUAndEntrypoint: gpu and gpu_type reach CreateSnapshot as gpu and the
// gpuType preference list, and the entrypoint as the Dockerfile's last ENTRYPOINT (Daytona
// refuses `entrypoint` next to `buildInfo`), which the snapshot then reports.
func TestBuildCarriesGPUAndEntrypoint(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t)
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: "true", GPU: 1, GPUType: "H100",
		Entrypoint: []string{"/usr/local/bin/serve", "--port", "8080"}}
	req := specReq(spec, "")
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v", st)
	}
	in, ok := srv.SnapshotInputs(req.ID)
	if !ok {
		t.Fatal("the emulator has no snapshot", req.ID)
	}
	if in.GPU != 1 || !slices.Equal(in.GPUType, []string{"H100"}) {
		t.Fatalf("gpu %d, gpuType %v; want 1, [H100]", in.GPU, in.GPUType)
	}
	if !strings.HasSuffix(in.Dockerfile, "ENTRYPOINT [\"/usr/local/bin/serve\",\"--port\",\"8080\"]\n") {
		t.Fatalf("Dockerfile does not end with the entrypoint:\n%s", in.Dockerfile)
	}
	s, err := c.GetSnapshot(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.GPU != 1 || s.GPUType != "H100" || !slices.Equal(s.Entrypoint, spec.Entrypoint) {
		t.Fatalf("snapshot gpu %d type %q entrypoint %v", s.GPU, s.GPUType, s.Entrypoint)
	}
}

// TestBuildGPUTypeUnavailable: a GPU type no runner has is refused as Daytona refuses it.
func TestBuildGPUTypeUnavailable(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	srv.SetGPURunners("H100")
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, GPU: 1, GPUType: "H200"}
	err := daytona.NewBuilder(c).StartBuild(testCtx(t), specReq(spec, ""))
	if err == nil || !strings.Contains(err.Error(), "No available runners with GPU type: H200") {
		t.Fatalf("StartBuild: %v; want Daytona's 'No available runners with GPU type: H200'", err)
	}
}

// TestBuildContextUploadedOncePerHash: a Dockerfile's context is uploaded once per content
// hash (a second snapshot with the same context finds it stored), named in
// buildInfo.contextHashes; one changed file makes a new hash, a new snapshot and one more
// upload; a folder changed after the plan is refused.
func TestBuildContextUploadedOncePerHash(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)
	dir, hash := writeContext(t, map[string]string{"app.txt": "v1\n", "lib/util.sh": "echo util\n"})
	build := func(dockerfile, dir, hash string) string {
		t.Helper()
		req := specReq(sandbox.SnapshotSpec{Dockerfile: dockerfile, ContextHash: hash}, dir)
		if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
			t.Fatalf("build: %+v", st)
		}
		return req.ID
	}
	first := build("FROM platform\nCOPY app.txt /workspace/app.txt\n", dir, hash)
	if n := srv.ContextUploads(); n != 1 || !srv.HasContext(hash) {
		t.Fatalf("%d uploads (stored: %v); want 1", n, srv.HasContext(hash))
	}
	in, _ := srv.SnapshotInputs(first)
	if !slices.Equal(in.ContextHashes, []string{hash}) || !strings.HasPrefix(in.Dockerfile, "FROM "+daytona.DefaultReleaseImage+"\n") {
		t.Fatalf("contextHashes %v, Dockerfile %q", in.ContextHashes, in.Dockerfile)
	}
	build("FROM platform\nCOPY . /workspace/src\n", dir, hash)
	if n := srv.ContextUploads(); n != 1 {
		t.Fatalf("%d uploads after a second build of the same context; want 1", n)
	}

	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := specReq(sandbox.SnapshotSpec{Dockerfile: "FROM platform\nCOPY app.txt /workspace/app.txt\n", ContextHash: hash}, dir)
	if err := b.StartBuild(ctx, stale); err == nil || !strings.Contains(err.Error(), "changed since the plan") {
		t.Fatalf("StartBuild with a changed folder: %v", err)
	}
	bc, err := sandbox.ReadBuildContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bc.Hash == hash {
		t.Fatal("a changed file left the context hash unchanged")
	}
	creates := srv.Count("POST /snapshots")
	second := build("FROM platform\nCOPY app.txt /workspace/app.txt\n", dir, bc.Hash)
	if second == first || srv.ContextUploads() != 2 || srv.Count("POST /snapshots") != creates+1 {
		t.Fatalf("after a change: same id %v, %d uploads, %d creates; want a new snapshot, 2 uploads, 1 create",
			second == first, srv.ContextUploads(), srv.Count("POST /snapshots")-creates)
	}
}

// TestDockerfileBuildSandboxSeesRun: a sandbox of a Dockerfile snapshot has its COPY's
// files and its RUN's effects.
func TestDockerfileBuildSandboxSeesRun(t *testing.T) {
	t.Parallel()
	_, c, ctx, b := setupBuilder(t)
	dir, hash := writeContext(t, map[string]string{"app.txt": "from the context\n"})
	// Relative paths are Docker's, from the WORKDIR; files put in /workspace as root are
	// the sandbox user's afterwards (withWorkspace), so the agent can change them.
	spec := sandbox.SnapshotSpec{Dockerfile: "# comment\nFROM platform\nWORKDIR /workspace\nCOPY app.txt app.txt\n" +
		"RUN cat app.txt > copied.txt && \\\n    echo ran > /workspace/from-run.txt\n", ContextHash: hash}
	req := specReq(spec, dir)
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v", st)
	}
	zero := 0
	rt := &daytona.Runtime{C: c, AutoStop: &zero}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "df-1", SnapshotID: req.ID}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "df-1") })
	res := mustExec(t, rt, "df-1", sandbox.ExecRequest{Shell: "cat copied.txt from-run.txt"})
	if got := string(res.Stdout); got != "from the context\nran\n" {
		t.Fatalf("sandbox sees %q (stderr %q); want the COPY's and RUN's files", got, res.Stderr)
	}
	if err := rt.WriteFile(ctx, "df-1", "app.txt", strings.NewReader("changed by the agent\n"), 0o644); err != nil {
		t.Fatalf("the agent changing a file the build copied into /workspace as root: %v", err)
	}
}

// TestDockerfileBuildFailures: a base image the registry does not have, and a context hash
// never uploaded, fail the build as Daytona's runner fails it.
func TestDockerfileBuildFailures(t *testing.T) {
	t.Parallel()
	_, c, ctx, b := setupBuilder(t)
	req := specReq(sandbox.SnapshotSpec{Dockerfile: "FROM example.invalid/nothing:1\nRUN true\n"}, "")
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusFailed || !strings.Contains(st.Reason, "pull access denied for example.invalid/nothing:1") {
		t.Fatalf("unknown base: %+v", st)
	}
	if _, err := c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: "no-context",
		BuildInfo: &daytona.BuildInfo{DockerfileContent: "FROM ubuntu:24.04\nCOPY . /x\n", ContextHashes: []string{"0123abcd"}}}); err != nil {
		t.Fatal(err)
	}
	s, err := c.WaitSnapshot(ctx, "no-context")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != daytona.SnapshotBuildFailed || !strings.Contains(s.ErrorReason, "failed to get tar from storage with hash 0123abcd") {
		t.Fatalf("missing context: %s %q", s.State, s.ErrorReason)
	}
}

// TestEmulatorLintsUnknownFields: the emulator refuses a CreateSnapshot or CreateSandbox
// property the OpenAPI document does not have, as a lint for our client's field names.
// Daytona itself does not: v0.190's ValidationPipe has no forbidNonWhitelisted
// (apps/api/src/main.ts:72-76), so it ignores such a property. A gpuType outside GpuType
// is refused by both. CreateSandbox's schema is the v0.205 document's: `class` (in
// neither v0.190's DTO nor v0.205's document) is refused and otelEndpointOverride
// (v0.205) is accepted.
func TestEmulatorLintsUnknownFields(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t)
	for _, c := range []struct{ route, body, want string }{
		{"/snapshots", `{"name":"x","imageName":"ubuntu:24.04","gpuTypes":["H100"]}`, "property gpuTypes should not exist"},
		{"/snapshots", `{"name":"x","imageName":"ubuntu:24.04","gpu":1,"gpuType":["A100"]}`, "each value in gpuType must be one of"},
		{"/sandbox", `{"name":"x","snapshot":"release","networkAllowListV2":"10.0.0.0/8"}`, "property networkAllowListV2 should not exist"},
		{"/sandbox", `{"name":"x","snapshot":"release","class":"small"}`, "property class should not exist"},
		// A known v0.205 field gets past the decoding (and fails later on the missing
		// snapshot, not on the property).
		{"/sandbox", `{"name":"x","snapshot":"nope","otelEndpointOverride":"https://otel.example.com:4318"}`, "Snapshot nope not found"},
	} {
		if status, msg := rawJSON(t, http.MethodPost, srv.URL()+c.route, c.body); status != 400 || !strings.Contains(msg, c.want) {
			t.Fatalf("%s: %d %s; want 400 %q", c.body, status, msg, c.want)
		}
	}
}

// TestEmulatorSnapshotGPUBounds: as v0.190's CreateSnapshotDto (create-snapshot.dto.ts:
// 69-73, 92-96), the emulator refuses gpu > 1 and more than one gpuType with
// class-validator's messages.
func TestEmulatorSnapshotGPUBounds(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t)
	for body, want := range map[string]string{
		`{"name":"x","imageName":"ubuntu:24.04","gpu":2}`:                           "gpu must not be greater than 1",
		`{"name":"x","imageName":"ubuntu:24.04","gpu":1,"gpuType":["H100","H200"]}`: "gpuType must contain no more than 1 elements",
	} {
		if status, msg := rawJSON(t, http.MethodPost, srv.URL()+"/snapshots", body); status != 400 || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %s; want 400 %q", body, status, msg, want)
		}
	}
}

// TestCheckEnvironmentBuildInputs: Daytona's plan-time check names more GPUs than Daytona
// allows (gpu is @Max(1) in v0.190's create-snapshot.dto.ts:69-73), an unknown GPU type, a
// GPU type without GPUs and a Dockerfile that starts from no image.
func TestCheckEnvironmentBuildInputs(t *testing.T) {
	t.Parallel()
	b := &daytona.Backend{}
	check := func(spec sandbox.SnapshotSpec) []sandbox.Problem {
		return b.CheckEnvironment(testCtx(t), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "e", Spec: spec})
	}
	for _, c := range []struct {
		spec       sandbox.SnapshotSpec
		attr, want string
	}{
		{sandbox.SnapshotSpec{GPU: 2}, "gpu", "Daytona allows at most 1 GPU per sandbox"},
		{sandbox.SnapshotSpec{GPU: 1, GPUType: "A100"}, "gpu_type", "Use one of H100, H200"},
		{sandbox.SnapshotSpec{GPUType: "H100"}, "gpu_type", "Set gpu to the number of GPUs"},
		{sandbox.SnapshotSpec{Dockerfile: "# x\nRUN true\n"}, "dockerfile", "does not start with a FROM"},
	} {
		ps := check(c.spec)
		if len(ps) != 1 || ps[0].Attribute != c.attr || ps[0].Warning || !strings.Contains(ps[0].Detail, c.want) {
			t.Errorf("%+v: %+v; want one error on %s containing %q", c.spec, ps, c.attr, c.want)
		}
	}
	if ps := check(sandbox.SnapshotSpec{GPU: 1, GPUType: "H100", Dockerfile: "# syntax=docker/dockerfile:1\nARG V=1\nFROM python:3.12\n"}); len(ps) != 0 {
		t.Errorf("valid inputs: %+v", ps)
	}
}

// TestGPUSandboxesAreEphemeral: Daytona refuses a GPU sandbox that is not ephemeral
// (autoDeleteInterval 0), so a sandbox of a GPU snapshot is created with DeleteOnStop,
// and its idle stop deletes it instead of keeping a GPU allocated while it is stopped.
func TestGPUSandboxesAreEphemeral(t *testing.T) {
	t.Parallel()
	_, c, ctx, b := setupBuilder(t)
	req := specReq(sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: "true", GPU: 1, GPUType: "H100"}, "")
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v", st)
	}
	rt := &daytona.Runtime{C: c}
	lc := sandbox.Lifecycle{IdleStop: 10 * time.Minute, DeleteAfter: 24 * time.Hour}
	err := rt.Create(ctx, sandbox.CreateRequest{ID: "gpu-kept", SnapshotID: req.ID, Lifecycle: lc})
	if err == nil || !strings.Contains(err.Error(), "ephemeral") {
		t.Fatalf("a GPU sandbox kept after its stop: %v; want Daytona's refusal", err)
	}
	lc.DeleteOnStop = true
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "gpu", SnapshotID: req.ID, Lifecycle: lc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "gpu") })
	if err := rt.Stop(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Get(ctx, "gpu"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the GPU sandbox after its stop: %v; want it deleted", err)
	}
}

// TestContextDockerfileDoesNotReplaceTheEnvironments (issue 24 M5): Daytona's runner
// writes the API's Dockerfile first and the context's files after it, so a context file
// named Dockerfile would be the one built (v0.190 apps/runner/pkg/docker/image_build.go:
// 45-118). With build_context = "." next to dockerfile = file("Dockerfile"), that raw file
// says FROM platform, which no registry has. The client leaves a root Dockerfile out of
// the uploaded context, under a name of its own, so the environment's dockerfile (with
// FROM platform replaced) is what builds; the context's other files are still there.
func TestContextDockerfileDoesNotReplaceTheEnvironments(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t)
	df := "FROM platform\nCOPY app.txt /workspace/app.txt\n"
	dir, hash := writeContext(t, map[string]string{"Dockerfile": df, "app.txt": "from the context\n"})
	req := specReq(sandbox.SnapshotSpec{Dockerfile: df, ContextHash: hash}, dir)
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("a build whose context holds its Dockerfile: %+v", st)
	}
	if srv.HasContext(hash) {
		t.Error("the context with its Dockerfile was stored under the context's own hash, where an older release's tarball (Dockerfile included) may be")
	}
	rt := daytona.NewRuntime(c)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "m5", SnapshotID: req.ID}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "m5") })
	if b, err := rt.ReadFile(ctx, "m5", "app.txt", 0); err != nil || string(b) != "from the context\n" {
		t.Fatalf("the context's file in the sandbox: %q, %v", b, err)
	}
}
