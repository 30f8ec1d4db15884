package daytona_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

func intp(i int) *int { return &i }

func TestSecrets(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	s, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "team-a_GH_TOKEN", Value: "v1", Hosts: []string{"api.github.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Placeholder, "dtn_secret_") || s.Placeholder == "v1" || s.ID == "" {
		t.Fatalf("secret %+v", s)
	}
	if _, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "team-a_GH_TOKEN", Value: "v"}); !daytona.IsConflict(err) {
		t.Fatalf("duplicate: %v", err)
	}

	// Rotation is one PATCH; the value is stored but never returned.
	v2, hosts := "v2", []string{"*.github.com"}
	up, err := c.UpdateSecret(ctx, s.ID, daytona.UpdateSecretRequest{Value: &v2, Hosts: &hosts})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.SecretValue("team-a_GH_TOKEN"); got != "v2" {
		t.Fatalf("value = %q", got)
	}
	if up.Placeholder != s.Placeholder || strings.Join(up.Hosts, ",") != "*.github.com" {
		t.Fatalf("updated %+v", up)
	}
	if n := srv.Count("PATCH /secret/{id}"); n != 1 {
		t.Fatalf("PATCH = %d", n)
	}
	if _, err := c.UpdateSecret(ctx, s.ID, daytona.UpdateSecretRequest{Hosts: &[]string{"host:443"}}); err == nil {
		t.Fatal("host with port accepted")
	}

	for _, n := range []string{"b", "c"} {
		if _, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: n, Value: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.ListSecrets(ctx, daytona.SecretListOptions{Limit: 2})
	if err != nil || len(p.Items) != 2 || p.Total != 3 || p.NextCursor == "" {
		t.Fatalf("page %+v %v", p, err)
	}
	all, err := c.AllSecrets(ctx, daytona.SecretListOptions{Limit: 1})
	if err != nil || len(all) != 3 {
		t.Fatalf("all %d %v", len(all), err)
	}

	if err := c.DeleteSecret(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSecret(ctx, s.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestSandboxes(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	snap := readySnapshot(t, ctx, c, "true")
	if _, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "tok", Value: "real-value", Hosts: []string{"example.com"}}); err != nil {
		t.Fatal(err)
	}

	mk := func(name, session string) *daytona.Sandbox {
		sb, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{
			Name: name, Snapshot: snap, Env: map[string]string{"FOO": "bar"},
			Labels:          map[string]string{"trueforge/session": session, "trueforge/env": "default"},
			NetworkBlockAll: false, DomainAllowList: "example.com,*.github.com",
			AutoStopInterval: intp(0), AutoArchiveInterval: intp(60), AutoDeleteInterval: intp(-1),
			Secrets: []map[string]string{{"TOKEN": "tok"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	a := mk("a", "s1")
	mk("b", "s1")
	mk("c", "s2")
	if a.State != daytona.SandboxStarted || a.Env["FOO"] != "bar" || a.DomainAllowList != "example.com,*.github.com" ||
		a.AutoStopInterval == nil || *a.AutoStopInterval != 0 || a.ToolboxProxyURL == "" {
		t.Fatalf("sandbox %+v", a)
	}

	got, err := c.AllSandboxes(ctx, daytona.SandboxListOptions{Labels: map[string]string{"trueforge/session": "s1"}, Limit: 1})
	if err != nil || len(got) != 2 {
		t.Fatalf("list by labels: %d %v", len(got), err)
	}

	// Documented 400s.
	for name, req := range map[string]daytona.CreateSandboxRequest{
		"resources with snapshot": {Snapshot: snap, CPU: 2},
		"11 domains":              {Snapshot: snap, DomainAllowList: strings.Repeat("a.com,", 10) + "b.com"},
		"bad cidr":                {Snapshot: snap, NetworkAllowList: "10.0.0.1"},
		"unknown snapshot":        {Snapshot: "nope"},
	} {
		_, err := c.CreateSandbox(ctx, req)
		if e := (*daytona.APIError)(nil); !errors.As(err, &e) || e.Status != 400 {
			t.Errorf("%s: want 400, got %v", name, err)
		}
	}
	if _, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "a", Snapshot: snap}); !daytona.IsConflict(err) {
		t.Errorf("duplicate name: %v", err)
	}

	// Toolbox.
	res, err := c.Execute(ctx, a, daytona.ExecuteRequest{Command: "echo $FOO $TOKEN; pwd >/dev/null; echo err >&2; exit 3", Timeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !strings.Contains(res.Result, "bar dtn_secret_") || !strings.Contains(res.Result, "err") ||
		strings.Contains(res.Result, "real-value") {
		t.Fatalf("exec %+v", res)
	}
	if err := c.UploadFile(ctx, a, "/workspace/dir/f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.DownloadFile(ctx, a, "/workspace/dir/f.txt"); err != nil || string(b) != "data" {
		t.Fatalf("download %q %v", b, err)
	}
	if res, err := c.Execute(ctx, a, daytona.ExecuteRequest{Command: "cat f.txt", Cwd: "/workspace/dir"}); err != nil || res.Result != "data" {
		t.Fatalf("cwd exec %+v %v", res, err)
	}
	if _, err := c.Execute(ctx, a, daytona.ExecuteRequest{Command: "sleep 5", Timeout: 1}); !hasStatus(err, 408) {
		t.Fatalf("timeout: %v", err)
	}

	// Lifecycle and its 400 rules.
	if _, err := c.ArchiveSandbox(ctx, a.ID); !hasStatus(err, 400) {
		t.Fatalf("archive started: %v", err)
	}
	if _, err := c.StopSandbox(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopSandbox(ctx, a.ID, false); !hasStatus(err, 400) {
		t.Fatalf("stop stopped: %v", err)
	}
	if _, err := c.Execute(ctx, a, daytona.ExecuteRequest{Command: "true"}); !hasStatus(err, 400) {
		t.Fatalf("exec on stopped: %v", err)
	}
	if _, err := c.ArchiveSandbox(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSandbox(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if sb, err := c.WaitSandbox(ctx, a.ID, daytona.SandboxStarted); err != nil || sb.State != "started" {
		t.Fatalf("wait started: %v", err)
	}
	if _, err := c.SetSandboxSecrets(ctx, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	off := ""
	if sb, err := c.UpdateNetworkSettings(ctx, a.ID, daytona.NetworkSettings{DomainAllowList: &off}); err != nil || sb.DomainAllowList != "" {
		t.Fatalf("network settings: %+v %v", sb, err)
	}
	if err := c.DeleteSandbox(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSandbox(ctx, a.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if srv.SandboxState("a") != "" {
		t.Fatal("deleted sandbox still listed")
	}
	// The name is free at once.
	mk("a", "s3")
}

func TestSandboxStateChangeInProgress(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, daytonatest.WithLifecycleDelay(400*time.Millisecond))
	ctx := testCtx(t)
	snap := readySnapshot(t, ctx, c, "true")
	sb, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.StopSandbox(ctx, sb.ID, false); err != nil || st.State != "stopping" {
		t.Fatalf("stop: %+v %v", st, err)
	}
	// Start during `stopping` is answered 409 "state change in progress"; the client waits and
	// retries until the stop has finished.
	if _, err := c.StartSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("POST /sandbox/{id}/start"); n < 2 {
		t.Fatalf("start requests = %d, want a 409 then a retry", n)
	}
	if _, err := c.WaitSandbox(ctx, sb.ID, daytona.SandboxStarted); err != nil {
		t.Fatal(err)
	}
}

func hasStatus(err error, status int) bool {
	var e *daytona.APIError
	return errors.As(err, &e) && e.Status == status
}

// A command may run for as long as its own timeout: the request deadline follows it,
// not the client's default (here 2 s, in production 60 s, while the harness allows
// commands up to 30 minutes).
func TestExecOutlivesTheDefaultRequestTimeout(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t)
	// The sandbox is made by a client with the default timeout: creating one starts a
	// real box, which a busy machine can take over 2 s to do, and that is not what this
	// test is about. Only the command goes through the client with the short default.
	setup := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond))
	c := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond),
		daytona.WithRequestTimeout(2*time.Second))
	ctx := testCtx(t)
	snap := readySnapshot(t, ctx, setup, "true")
	sb, err := setup.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "long", Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != daytona.SandboxStarted {
		if sb, err = setup.WaitSandbox(ctx, sb.ID, daytona.SandboxStarted); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Execute(ctx, sb, daytona.ExecuteRequest{Command: "sleep 3; echo done", Timeout: 10})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Result) != "done" {
		t.Fatalf("a 3 s command under a 2 s default: %+v, %v", res, err)
	}
}
