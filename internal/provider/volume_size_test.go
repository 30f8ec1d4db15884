package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Where the local backend cannot keep a volume to its size (an unprivileged user, a
// shared snapshot directory), the plan of the volume says so, on size: a warning, or an
// error when the sandbox provider requires limits; nothing where it can, and nothing
// for a change that leaves the size alone.
func TestVolumePlanSaysWhetherItsSizeIsEnforced(t *testing.T) {
	t.Parallel()
	const why = "running as uid 1000: only root can loop-mount the ext4 image that caps a volume"
	cases := []struct {
		name      string
		require   bool
		probe     string
		resize    bool
		unchanged bool
		want      string
	}{
		{"create, not required", false, why, false, false, "Volume Size Not Enforced On This Host"},
		{"create, required", true, why, false, false, "Volume Size Cannot Be Enforced"},
		{"grow, not required", false, why, true, false, "Volume Size Not Enforced On This Host"},
		{"shared_with only", true, why, false, true, ""},
		{"enforced", true, "", false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, nil)
			f.exec(`UPDATE sandbox_providers SET require_limits = ?`, c.require)
			reg := backends.Default()
			reg[local.Type] = &local.Backend{VolumeProbe: func(bool) string { return c.probe }}
			cp.backends = reg
			r := configured(t, &volumeResource{}, cp)
			s := resourceSchema(t, r)
			model := volumeResourceModel{
				ID: types.StringValue("cache"), Name: types.StringValue("cache"), SandboxProvider: types.StringValue("local"),
				RemoteID: types.StringValue("cache"), Size: types.Int64Value(store.DefaultVolumeSizeGB),
				SharedWith: types.SetValueMust(types.StringType, nil), Timeouts: nullTimeouts(t, s),
			}
			var diags diag.Diagnostics
			switch {
			case c.resize || c.unchanged:
				if err := cp.store.CreateVolume(t.Context(), store.Volume{Name: "cache", Provider: "local", Owner: f.owner, RemoteID: "cache"}); err != nil {
					t.Fatal(err)
				}
				plan := model
				if c.resize {
					plan.Size = types.Int64Value(20)
				} else {
					plan.SharedWith = types.SetValueMust(types.StringType, []attr.Value{types.StringValue("bob")})
				}
				diags, _ = modifyPlan(t, r, s, &model, &plan)
			default:
				plan := model
				plan.ID, plan.RemoteID = types.StringUnknown(), types.StringUnknown()
				diags, _ = modifyPlan(t, r, s, nil, &plan)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.Summary())
				if d.Summary() == c.want && !strings.Contains(d.Detail(), why) {
					t.Errorf("detail %q does not say why", d.Detail())
				}
			}
			if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Fatalf("diagnostics %v; want %q", got, c.want)
			}
			if c.want == "Volume Size Cannot Be Enforced" && !diags.HasError() {
				t.Fatal("a required size that cannot be enforced is only a warning")
			}
		})
	}
}
