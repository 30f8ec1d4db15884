package daytona_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestLiveCurrentAPIKey calls the real API, read-only (GET /api-keys/current). It runs only
// when DAYTONA_API_KEY is set; DAYTONA_API_URL overrides the base URL.
func TestLiveCurrentAPIKey(t *testing.T) {
	t.Parallel()
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("DAYTONA_API_KEY is not set: skipping the live Daytona API test (read-only GET /api-keys/current)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := daytona.New(os.Getenv("DAYTONA_API_URL"), key)
	k, err := c.CurrentAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("key %q has permissions %v; missing for trueforge: %v", k.Name, k.Permissions,
		k.Missing("write:sandboxes", "write:snapshots", "manage:secrets"))
}
