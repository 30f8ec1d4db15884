package daytona_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// liveClient returns a client on the real API, or skips (saying so) when DAYTONA_API_KEY is
// not set. DAYTONA_API_URL overrides the base URL.
func liveClient(t *testing.T) (*daytona.Client, context.Context) {
	t.Helper()
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("DAYTONA_API_KEY is not set: skipping the live Daytona API test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return daytona.New(os.Getenv("DAYTONA_API_URL"), key), ctx
}

// TestLiveCurrentAPIKey calls the real API, read-only (GET /api-keys/current).
func TestLiveCurrentAPIKey(t *testing.T) {
	t.Parallel()
	c, ctx := liveClient(t)
	k, err := c.CurrentAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("key %q has permissions %v; missing for trueforge: %v", k.Name, k.Permissions,
		k.Missing("write:sandboxes", "write:snapshots", "manage:secrets"))
}

// TestLiveSecretRoundTrip creates, rotates, reads and deletes a uniquely named secret on
// the real API (cheap: no snapshot or sandbox). It needs manage:secrets and says so.
func TestLiveSecretRoundTrip(t *testing.T) {
	t.Parallel()
	c, ctx := liveClient(t)
	if _, err := c.RequirePermissions(ctx, "manage:secrets"); err != nil {
		t.Skipf("the key cannot manage secrets, skipping: %v", err)
	}
	name := daytona.SecretName("livetest", "TOKEN_"+time.Now().UTC().Format("20060102T150405"))
	s, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: name, Value: "v1", Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSecret(context.Background(), s.ID) })
	v2, hosts := "v2", []string{"api.example.com"}
	u, err := c.UpdateSecret(ctx, s.ID, daytona.UpdateSecretRequest{Value: &v2, Hosts: &hosts})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetSecret(ctx, s.ID)
	if err != nil || len(got.Hosts) != 1 || got.Hosts[0] != "api.example.com" || !got.UpdatedAt.Equal(u.UpdatedAt) {
		t.Fatalf("after PATCH: %+v %v", got, err)
	}
	if err := c.DeleteSecret(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSecret(ctx, s.ID); !daytona.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}
