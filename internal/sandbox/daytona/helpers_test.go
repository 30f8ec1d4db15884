package daytona_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// fastRetry keeps backoff short; server-requested waits are still honoured.
var fastRetry = daytona.RetryPolicy{MaxAttempts: 6, BaseDelay: 2 * time.Millisecond,
	MaxDelay: 20 * time.Millisecond, MaxServerWait: 10 * time.Second, StateChangeWait: 5 * time.Second}

func newClient(t testing.TB, srv *daytonatest.Server, key string) *daytona.Client {
	t.Helper()
	return daytona.New(srv.URL(), key, daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond))
}

func setup(t testing.TB, opts ...daytonatest.Option) (*daytonatest.Server, *daytona.Client) {
	t.Helper()
	srv := daytonatest.NewServer(t, opts...)
	return srv, newClient(t, srv, daytonatest.DefaultKey)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitBuild polls the builder until the build leaves Building.
func waitBuild(t testing.TB, ctx context.Context, b *daytona.Builder, id string) sandbox.BuildState {
	t.Helper()
	for {
		st, err := b.BuildState(ctx, id)
		if err != nil {
			t.Fatalf("BuildState(%s): %v", id, err)
		}
		if st.Status != sandbox.StatusBuilding {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("build %s still building: %v", id, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// setupBuilder is setup with a builder on its client and a context for the test.
func setupBuilder(t testing.TB, opts ...daytonatest.Option) (*daytonatest.Server, *daytona.Client, context.Context, *daytona.Builder) {
	t.Helper()
	srv, c := setup(t, opts...)
	return srv, c, testCtx(t), daytona.NewBuilder(c)
}

// build starts req and waits until it leaves Building.
func build(t testing.TB, ctx context.Context, b *daytona.Builder, req sandbox.BuildRequest) sandbox.BuildState {
	t.Helper()
	if err := b.StartBuild(ctx, req); err != nil {
		t.Fatal(err)
	}
	return waitBuild(t, ctx, b, req.ID)
}

func buildReq(script string) sandbox.BuildRequest {
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: script}
	return sandbox.BuildRequest{ID: sandbox.SnapshotID(spec.BuildHash()), Spec: spec, Base: "release"}
}

// readySnapshot builds a snapshot with the builder and returns its name.
func readySnapshot(t testing.TB, ctx context.Context, c *daytona.Client, script string) string {
	t.Helper()
	b := daytona.NewBuilder(c)
	req := buildReq(script)
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v", st)
	}
	return req.ID
}

func daytonatestSlow() []daytonatest.Option {
	return []daytonatest.Option{daytonatest.WithBuildDelay(time.Hour)}
}

// rawJSON sends a JSON request with the default key straight to the emulator, past the
// client (to send what the client would not), and returns the status and body.
func rawJSON(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+daytonatest.DefaultKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// onEmulator is what open (a Backend's Runtime, Volumes or Registries) gives for the
// emulator srv with the default key.
func onEmulator[T any](t testing.TB, ctx context.Context, srv *daytonatest.Server, open func(context.Context, sandbox.ProviderConfig) (T, error)) T {
	t.Helper()
	v, err := open(ctx, sandbox.ProviderConfig{Name: "d", Type: daytona.Type, APIURL: srv.URL(), APIKey: daytonatest.DefaultKey})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readyVolume creates the Daytona volume name and waits for it to be ready.
func readyVolume(t testing.TB, ctx context.Context, c *daytona.Client, name string) *daytona.Volume {
	t.Helper()
	v, err := c.CreateVolume(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	return v
}
