package daytona_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestEmulatorRefusesAsDaytona pins refusals of the emulator that no client path meets
// in the other tests, each as the v0.190 server source cited beside it in daytonatest
// (BEHAVIOURS.md lists them): what a request Daytona refuses gets from the emulator.
func TestEmulatorRefusesAsDaytona(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	refused := func(what string, err error, status int, text string) {
		t.Helper()
		var e *daytona.APIError
		if !errors.As(err, &e) || e.Status != status || !strings.Contains(e.Message, text) {
			t.Errorf("%s: %v; want %d %q", what, err, status, text)
		}
	}

	// snapshot.service.ts:123: a name outside the allowed characters.
	_, err := c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: "bad name!", ImageName: daytona.DefaultReleaseImage})
	refused("snapshot named \"bad name!\"", err, 400, "Invalid snapshot name")

	// Secrets: the name's characters, a value.
	_, err = c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "bad name", Value: "v"})
	refused("secret named \"bad name\"", err, 400, "name must contain only alphanumeric characters, hyphens and underscores")
	_, err = c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "empty"})
	refused("secret without a value", err, 400, "value should not be empty")

	snap := readySnapshot(t, ctx, c, "echo refusals")
	// A sandbox naming a secret the organization does not have.
	_, err = c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "nosecret", Snapshot: snap, Secrets: []map[string]string{{"TOKEN": "missing"}}})
	refused("sandbox with an unknown secret", err, 400, "Secret missing not found")

	// sandbox.service.ts:2160-2162: only a started sandbox stops.
	rt := daytona.NewRuntime(c)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "stopper", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "stopper") })
	sb, err := c.GetSandbox(ctx, "stopper")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopSandbox(ctx, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSandbox(ctx, sb.ID, daytona.SandboxStopped); err != nil {
		t.Fatal(err)
	}
	_, err = c.StopSandbox(ctx, sb.ID, false)
	refused("stop of a stopped sandbox", err, 400, "Sandbox is not in a stoppable state")

	// apps/daemon/pkg/toolbox/process/session/session.go:36: "entrypoint" is reserved.
	if _, err := c.StartSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if sb, err = c.WaitSandbox(ctx, sb.ID, daytona.SandboxStarted); err != nil {
		t.Fatal(err)
	}
	refused("session named entrypoint", c.CreateSession(ctx, sb, "entrypoint"), 400, "provided session ID is reserved")
}

// TestEmulatorRegistryLimitAndURL: at most 100 registries an organization
// (docker-registry.service.ts:107), and a url stored without trailing slashes, Docker
// Hub's as docker.io (docker-registry.service.ts:44).
func TestEmulatorRegistryLimitAndURL(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	for i := range 100 {
		url := fmt.Sprintf("registry%d.example.com/", i)
		if i == 0 {
			url = "https://index.docker.io/v1/"
		}
		g, err := c.CreateDockerRegistry(ctx, daytona.CreateDockerRegistryRequest{Name: fmt.Sprintf("r%d", i), URL: url, Username: "bot", Password: "pw"})
		if err != nil {
			t.Fatalf("registry %d: %v", i, err)
		}
		want := strings.TrimRight(url, "/")
		if i == 0 {
			want = "docker.io"
		}
		if g.URL != want {
			t.Fatalf("registry %d stored url %q; want %q", i, g.URL, want)
		}
	}
	_, err := c.CreateDockerRegistry(ctx, daytona.CreateDockerRegistryRequest{Name: "r100", URL: "registry100.example.com", Username: "bot", Password: "pw"})
	var e *daytona.APIError
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "maximum number of registries") {
		t.Fatalf("the 101st registry: %v; want 400 maximum number of registries", err)
	}
}

// TestEmulatorObjectPutNeedsALength: S3 refuses a PUT without Content-Length (a chunked
// body) with 411 MissingContentLength (AWS S3 API Reference, Error responses).
func TestEmulatorObjectPutNeedsALength(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	a := pushAccess(t, c)
	body := []byte("tar")
	req, err := http.NewRequest(http.MethodPut, a.StorageURL+"/"+a.Bucket+"/"+a.OrganizationID+"/x/context.tar", io.MultiReader(strings.NewReader(string(body))))
	if err != nil {
		t.Fatal(err)
	}
	daytona.SignS3(req, a, body, time.Now().UTC())
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusLengthRequired || !strings.Contains(string(b), "<Code>MissingContentLength</Code>") {
		t.Fatalf("chunked PUT: %d %s; want 411 MissingContentLength", resp.StatusCode, b)
	}
}
