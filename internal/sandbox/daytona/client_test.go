package daytona_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

func TestHeaders(t *testing.T) {
	t.Parallel()
	var got http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if r.URL.Path != "/api/api-keys/current" {
			t.Errorf("path %s", r.URL.Path)
		}
		_, _ = w.Write([]byte(`{"name":"k","permissions":["write:sandboxes"]}`))
	}))
	defer ts.Close()
	c := daytona.New(ts.URL+"/api/", "secret-key", daytona.WithOrganizationID("org-1"))
	k, err := c.CurrentAPIKey(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "k" || len(k.Permissions) != 1 {
		t.Fatalf("key %+v", k)
	}
	for h, want := range map[string]string{
		"Authorization": "Bearer secret-key", "X-Daytona-Sdk-Version": daytona.SDKVersion,
		"X-Daytona-Source": "trueforge", "X-Daytona-Organization-Id": "org-1",
	} {
		if got.Get(h) != want {
			t.Errorf("%s = %q, want %q", h, got.Get(h), want)
		}
	}
}

func TestMissingPermissions(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t)
	srv.AddKey("limited", "write:sandboxes", "delete:sandboxes")
	c := newClient(t, srv, "limited")
	ctx := testCtx(t)

	_, err := c.RequirePermissions(ctx, "write:sandboxes", "write:snapshots", "manage:secrets")
	var me *daytona.MissingPermissionsError
	if !errors.As(err, &me) {
		t.Fatalf("want MissingPermissionsError, got %v", err)
	}
	if strings.Join(me.Missing, ",") != "write:snapshots,manage:secrets" {
		t.Fatalf("missing = %v", me.Missing)
	}
	for _, p := range []string{"write:snapshots", "manage:secrets"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	if ok, p := daytona.IsForbidden(err); !ok || p != "write:snapshots" {
		t.Errorf("IsForbidden = %v %q", ok, p)
	}

	// The API's own 403 names the permission too.
	_, err = c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "x", Value: "v"})
	if ok, p := daytona.IsForbidden(err); !ok || p != "manage:secrets" {
		t.Fatalf("IsForbidden(%v) = %v %q", err, ok, p)
	}
	if srv.Count("POST /secret") != 1 {
		t.Errorf("403 must not be retried: %d", srv.Count("POST /secret"))
	}

	// An unknown key is 401.
	_, err = newClient(t, srv, "nope").CurrentAPIKey(ctx)
	if e := (*daytona.APIError)(nil); !errors.As(err, &e) || e.Status != 401 {
		t.Fatalf("want 401, got %v", err)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	_, err := c.GetSnapshot(ctx, "nope")
	if !errors.Is(err, sandbox.ErrNotFound) || !daytona.IsNotFound(err) {
		t.Fatalf("want not found, got %v", err)
	}
	if !strings.Contains(err.Error(), "Snapshot nope not found") {
		t.Errorf("message lost: %v", err)
	}
	if _, err := c.GetSandbox(ctx, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("sandbox: %v", err)
	}
	if _, err := c.GetSecret(ctx, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("secret: %v", err)
	}
}

func TestRetry5xxBurst(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	srv.InjectFaults("GET /api-keys/current", 3, 503)
	if _, err := c.CurrentAPIKey(ctx); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("GET /api-keys/current"); n != 4 {
		t.Fatalf("requests = %d, want 4", n)
	}

	// Attempts are bounded.
	srv.ResetCounts()
	srv.InjectFaults("GET /api-keys/current", 100, 502)
	_, err := c.CurrentAPIKey(ctx)
	if e := (*daytona.APIError)(nil); !errors.As(err, &e) || e.Status != 502 {
		t.Fatalf("want 502, got %v", err)
	}
	if n := srv.Count("GET /api-keys/current"); n != fastRetry.MaxAttempts {
		t.Fatalf("requests = %d, want %d", n, fastRetry.MaxAttempts)
	}
}

func TestNoRetry5xxOnCreate(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	srv.InjectFaults("POST /secret", 1, 500)
	_, err := c.CreateSecret(testCtx(t), daytona.CreateSecretRequest{Name: "a", Value: "v"})
	if e := (*daytona.APIError)(nil); !errors.As(err, &e) || e.Status != 500 {
		t.Fatalf("want 500, got %v", err)
	}
	if n := srv.Count("POST /secret"); n != 1 {
		t.Fatalf("non-idempotent POST retried: %d requests", n)
	}
}

func TestRetry429HonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	// A POST that is not idempotent is still retried after a 429: the limiter refused it.
	srv.InjectFaults("POST /secret", 1, 429)
	start := time.Now()
	if _, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "a", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	// Retry-After is 1 s; the backoff alone would be <= 20 ms. Only a lower bound is asserted.
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("retried after %v, before Retry-After", el)
	}
	if n := srv.Count("POST /secret"); n != 2 {
		t.Fatalf("requests = %d, want 2", n)
	}
}

func TestRetryWaitBoundedByContext(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	srv.InjectFaults("GET /api-keys/current", 1, 429)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.CurrentAPIKey(ctx)
	if !daytona.IsRateLimited(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want rate-limited + deadline, got %v", err)
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Fatalf("waited %v past the deadline", el)
	}
}

func TestSnapshotPaging(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	for _, n := range []string{"img-a", "img-b", "img-c", "img-d", "other"} {
		if _, err := c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: n, ImageName: "ubuntu:24.04"}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.ListSnapshots(ctx, daytona.SnapshotListOptions{Limit: 2, Name: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 4 || p.TotalPages != 2 || len(p.Items) != 2 {
		t.Fatalf("page = %+v", p)
	}
	all, err := c.AllSnapshots(ctx, daytona.SnapshotListOptions{Limit: 2})
	if err != nil || len(all) != 5 {
		t.Fatalf("all = %d, %v", len(all), err)
	}
	// Validation: :latest is rejected, duplicates conflict.
	_, err = c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: "x", ImageName: "ubuntu:latest"})
	if e := (*daytona.APIError)(nil); !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("want 400, got %v", err)
	}
	_, err = c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: "other", ImageName: "ubuntu:24.04"})
	if !daytona.IsConflict(err) {
		t.Fatalf("want conflict, got %v", err)
	}
	// Delete and activate need the UUID.
	if err := c.DeleteSnapshot(ctx, "other"); err == nil {
		t.Fatal("delete by name accepted")
	}
}

func TestWaitSnapshotBoundedByContext(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, daytonatestSlow()...)
	b := daytona.NewBuilder(c)
	req := buildReq("sleep forever")
	if err := b.StartBuild(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.WaitSnapshot(ctx, req.ID)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("wait took %v", el)
	}
	// A rerun converges on the same build: no second POST /snapshots.
	if err := b.StartBuild(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("POST /snapshots"); n != 1 {
		t.Fatalf("POST /snapshots = %d, want 1", n)
	}
}
