package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestUnknownProviderTypeIsAClearError(t *testing.T) {
	st := harnesstest.NewStore(t)
	r := &backend.Runtimes{Store: st, Registry: backend.Default()}
	_, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "dt", Type: "daytona"})
	if err == nil || !strings.Contains(err.Error(), `type "daytona", which this harness cannot run (it runs: local)`) {
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
