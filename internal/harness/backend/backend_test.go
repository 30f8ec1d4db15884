package backend_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestUnknownProviderTypeIsAClearError(t *testing.T) {
	st := harnesstest.NewStore(t)
	r := &backend.Runtimes{Store: st, Registry: backend.Default()}
	_, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "e", Type: "e2b"})
	if err == nil || !strings.Contains(err.Error(), `type "e2b", which this harness cannot run (it runs: daytona, local)`) {
		t.Fatalf("err = %v", err)
	}
}

func TestProviderKeyOpensWhatTheProviderSealed(t *testing.T) {
	st := harnesstest.NewStore(t)
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, base64
	t.Setenv(secretbox.KeyEnv, key)
	box, err := secretbox.Load(key, "")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal([]byte("dtn-secret"), "sandbox_provider/dt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := backend.ProviderKey(st, store.SandboxProvider{Name: "dt", Type: "daytona", APIKeyEnc: sealed})
	if err != nil || string(got) != "dtn-secret" {
		t.Fatalf("ProviderKey = %q, %v", got, err)
	}
	if _, err := backend.ProviderKey(st, store.SandboxProvider{Name: "other", APIKeyEnc: sealed}); err == nil {
		t.Fatal("a key sealed for one provider opened for another")
	}
}

// The daytona type opens through the default registry with the provider's sealed key,
// and talks to the API (the emulator) with it.
func TestDefaultOpensDaytona(t *testing.T) {
	srv := daytonatest.NewServer(t)
	st := harnesstest.NewStore(t)
	t.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(st.Dir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal([]byte(daytonatest.DefaultKey), "sandbox_provider/dt")
	if err != nil {
		t.Fatal(err)
	}
	r := &backend.Runtimes{Store: st, Registry: backend.Default()}
	rt, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "dt", Type: "daytona", APIURL: srv.URL(), APIKeyEnc: sealed})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.(*daytona.Runtime); !ok {
		t.Fatalf("runtime %T; want *daytona.Runtime", rt)
	}
	if _, err := rt.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("GET /sandbox"); n != 1 {
		t.Fatalf("GET /sandbox reached the emulator %d times; want 1", n)
	}
	// No key: a clear error naming the provider.
	_, err = (&backend.Runtimes{Store: st, Registry: backend.Default()}).Runtime(context.Background(), store.SandboxProvider{Name: "nokey", Type: "daytona"})
	if err == nil || !strings.Contains(err.Error(), `"nokey" has no stored API key`) {
		t.Fatalf("err = %v", err)
	}
}
