package daytona_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestSecretPlaceholderFixedAtStart: a sandbox's secret variable holds the placeholder
// fixed when it started. A secret deleted and created again (as Terraform does when it
// was deleted outside) gets a new placeholder; a running sandbox keeps the old one, even
// while the secret does not exist, and a restarted one has the new one.
func TestSecretPlaceholderFixedAtStart(t *testing.T) {
	t.Parallel()
	_, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	mkSecret := func() *daytona.Secret {
		t.Helper()
		sec, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "token", Value: "v", Hosts: []string{"api.example.com"}})
		if err != nil {
			t.Fatal(err)
		}
		return sec
	}
	token := func() string {
		t.Helper()
		res := mustExec(t, rt, "sec", sandbox.ExecRequest{Shell: `printf %s "$TOKEN"`})
		return strings.TrimSpace(string(res.Stdout))
	}
	first := mkSecret()
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "sec", SnapshotID: snap, Secrets: map[string]string{"TOKEN": "token"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "sec") })
	if got := token(); got != first.Placeholder {
		t.Fatalf("TOKEN = %q, want the placeholder %q", got, first.Placeholder)
	}
	if err := c.DeleteSecret(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if got := token(); got != first.Placeholder {
		t.Fatalf("with the secret deleted, TOKEN = %q, want the placeholder it started with, %q", got, first.Placeholder)
	}
	second := mkSecret()
	if second.Placeholder == first.Placeholder {
		t.Fatalf("the recreated secret has the old placeholder %q", first.Placeholder)
	}
	if got := token(); got != first.Placeholder {
		t.Fatalf("with the secret recreated, TOKEN = %q, want the placeholder it started with, %q", got, first.Placeholder)
	}
	if err := rt.Stop(ctx, "sec"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "sec"); err != nil {
		t.Fatal(err)
	}
	if got := token(); got != second.Placeholder {
		t.Fatalf("after a restart, TOKEN = %q, want the recreated secret's placeholder %q", got, second.Placeholder)
	}
}

// TestSecretsAttachedToARunningSandbox: PUT /sandbox/{id}/secrets reaches new processes
// of a sandbox that started with secrets; one started with none sees them only after a
// restart.
func TestSecretsAttachedToARunningSandbox(t *testing.T) {
	t.Parallel()
	_, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	var ph []string
	for _, n := range []string{"one", "two"} {
		sec, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: n, Value: "v"})
		if err != nil {
			t.Fatal(err)
		}
		ph = append(ph, sec.Placeholder)
	}
	env := func(id string) string {
		t.Helper()
		res := mustExec(t, rt, id, sandbox.ExecRequest{Shell: `printf '%s|%s' "$A" "$B"`})
		return string(res.Stdout)
	}
	for id, secrets := range map[string]map[string]string{"with": {"A": "one"}, "without": nil} {
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: snap, Secrets: secrets}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), id) })
		if _, err := c.SetSandboxSecrets(ctx, id, []map[string]string{{"A": "one"}, {"B": "two"}}); err != nil {
			t.Fatal(err)
		}
	}
	both := ph[0] + "|" + ph[1]
	if got := env("with"); got != both {
		t.Fatalf("started with secrets, after the PUT: %q, want %q", got, both)
	}
	if got := env("without"); got != "|" {
		t.Fatalf("started without secrets, after the PUT: %q, want none until a restart", got)
	}
	if err := rt.Stop(ctx, "without"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "without"); err != nil {
		t.Fatal(err)
	}
	if got := env("without"); got != both {
		t.Fatalf("started without secrets, after the PUT and a restart: %q, want %q", got, both)
	}
}
