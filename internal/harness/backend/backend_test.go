package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestUnknownProviderTypeIsAClearError(t *testing.T) {
	st := harnesstest.NewStore(t)
	r := backend.New(controlplane.New(st))
	_, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "e", Type: "e2b"})
	if err == nil || !strings.Contains(err.Error(), `sandbox provider "e": sandbox provider type "e2b" has no backend in this build (it has: daytona, local); this harness cannot run it`) {
		t.Fatalf("err = %v", err)
	}
}

// The daytona type opens through the default registry with the provider's sealed key,
// and talks to the API (the emulator) with it; a key sealed for one provider does not
// open for another.
func TestDefaultOpensDaytona(t *testing.T) {
	srv := daytonatest.NewServer(t)
	st := harnesstest.NewStore(t)
	t.Setenv(secretbox.KeyEnv, "")
	plane := controlplane.New(st)
	sealed, err := plane.Seal(t.Context(), []byte(daytonatest.DefaultKey), controlplane.ProviderKeyLabel("dt"))
	if err != nil {
		t.Fatal(err)
	}
	r := backend.New(plane)
	rt, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "dt", Type: "daytona", APIURL: srv.URL(), APIKeyEnc: sealed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("GET /sandbox"); n != 1 {
		t.Fatalf("GET /sandbox reached the emulator %d times; want 1", n)
	}
	// No key: a clear error naming the provider.
	_, err = backend.New(plane).Runtime(context.Background(), store.SandboxProvider{Name: "nokey", Type: "daytona"})
	if err == nil || !strings.Contains(err.Error(), `"nokey" has no stored API key`) {
		t.Fatalf("err = %v", err)
	}
	_, err = backend.New(plane).Runtime(context.Background(), store.SandboxProvider{Name: "other", Type: "daytona", APIKeyEnc: sealed})
	if err == nil || !strings.Contains(err.Error(), `API key of sandbox provider "other" cannot be opened`) {
		t.Fatalf("a key sealed for one provider opened for another: %v", err)
	}
}
