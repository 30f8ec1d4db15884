package backend_test

import (
	"context"
	"os"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The local runtime requires its limits as the provider's require_limits says, unset
// meaning "when this process is root", and a cached runtime follows a later setting.
func TestLocalRuntimeFollowsRequireLimits(t *testing.T) {
	harnesstest.RequireSandboxTools(t)
	st := harnesstest.NewStore(t)
	r := backend.New(controlplane.New(st))
	yes, no := true, false
	for _, c := range []struct {
		setting *bool
		want    bool
	}{{&no, false}, {&yes, true}, {nil, os.Geteuid() == 0}, {&no, false}} {
		rt, err := r.Runtime(context.Background(), store.SandboxProvider{Name: "local", Type: "local", RequireLimits: c.setting})
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.(*local.Runtime).LimitsRequired(); got != c.want {
			t.Fatalf("require_limits %v: the runtime requires limits: %v, want %v", c.setting, got, c.want)
		}
	}
}
