package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// terraform-plugin-testing cannot see warnings, so the plan-time warnings are asserted
// here, by calling ModifyPlan as the framework does, with a control plane holding the rows
// it reads.

// modifyPlan runs r's ModifyPlan for prior state and plan (nil prior: a create) and
// returns its diagnostics and the resulting plan.
func modifyPlan(t *testing.T, r resource.ResourceWithModifyPlan, s schema.Schema, prior, plan any) (diag.Diagnostics, tfsdk.Plan) {
	t.Helper()
	planState := stateOf(t, s, plan)
	state := tfsdk.State{Schema: s, Raw: tftypes.NewValue(s.Type().TerraformType(t.Context()), nil)}
	if prior != nil {
		state = stateOf(t, s, prior)
	}
	req := resource.ModifyPlanRequest{
		Config: tfsdk.Config{Schema: s, Raw: planState.Raw.Copy()},
		Plan:   tfsdk.Plan{Schema: s, Raw: planState.Raw.Copy()},
		State:  state,
	}
	resp := resource.ModifyPlanResponse{Plan: tfsdk.Plan{Schema: s, Raw: planState.Raw.Copy()}}
	r.ModifyPlan(t.Context(), req, &resp)
	return resp.Diagnostics, resp.Plan
}

// warningsOf returns the warnings in diags by summary.
func warningsOf(diags diag.Diagnostics) map[string]diag.Diagnostic {
	out := map[string]diag.Diagnostic{}
	for _, d := range diags.Warnings() {
		out[d.Summary()] = d
	}
	return out
}

func warningSummaries(diags diag.Diagnostics) []string {
	var out []string
	for _, d := range diags.Warnings() {
		out = append(out, d.Summary())
	}
	slices.Sort(out)
	return out
}

// pyEnvironment is the state of environment "py" as seededControlPlane stores it: Ready,
// on its current snapshot, with the given network.
func pyEnvironment(t *testing.T, s schema.Schema, cp *controlPlane, blockAll bool, allow []string) environmentModel {
	t.Helper()
	env, err := cp.store.GetEnvironment(t.Context(), "py")
	if err != nil {
		t.Fatal(err)
	}
	allowList := types.ListNull(types.StringType)
	if allow != nil {
		allowList = stringList(allow)
	}
	m := environmentModel{
		ID: types.StringValue("py"), Name: types.StringValue("py"), SandboxProvider: types.StringValue("local"),
		Image: types.StringValue(sandbox.PlatformImage), BuildScript: types.StringValue(""),
		CPU: types.Int64Value(1), Memory: types.Int64Value(1), Disk: types.Int64Value(3),
		Triggers: types.MapNull(types.StringType), Env: types.MapNull(types.StringType),
		Network:      testNetwork(types.BoolValue(blockAll), allowList),
		WaitForReady: types.BoolValue(true), SnapshotID: types.StringValue(env.SnapshotID), BuildHash: types.StringValue(env.BuildHash),
		Status: types.StringValue(sandbox.StatusReady), Owner: types.StringValue(env.Owner), Timeouts: nullTimeouts(t, s),
	}
	nullSettings(&m)
	if spec, _ := m.spec(t.Context()); spec.BuildHash() != env.BuildHash {
		t.Fatalf("the seeded build hash %s is not the model's %s", env.BuildHash, spec.BuildHash())
	}
	return m
}

// asPlanned turns m into what Terraform proposes for a change of its configuration: the
// computed attributes without UseStateForUnknown are unknown.
func asPlanned(m environmentModel) environmentModel {
	m.SnapshotID, m.BuildHash, m.Status = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	return m
}

func TestEnvironmentBlockAllWarnsThatAllowListAndSecretsBecomeInert(t *testing.T) {
	t.Parallel()
	const summary = "Allow List And Secrets Become Inert"
	cases := []struct {
		name       string
		wasBlocked bool
		allow      []string
		secrets    []string
		want       []string // fragments of the warning's detail; nil: no warning
	}{
		{"allow list only", false, []string{"api.github.com"}, nil,
			[]string{`Turning block_all on for environment "py"`, "the allow list (1 entries)", "its 0 secret(s)", "kept but ignored until block_all is turned off"}},
		{"secrets only", false, nil, []string{"GITHUB_TOKEN", "NPM_TOKEN"},
			[]string{`environment "py"`, "the allow list (0 entries)", "its 2 secret(s)"}},
		{"allow list and secrets", false, []string{"api.github.com", "*.pypi.org"}, []string{"GITHUB_TOKEN"},
			[]string{`environment "py"`, "the allow list (2 entries)", "its 1 secret(s)"}},
		{"nothing to become inert", false, nil, nil, nil},
		{"empty allow list", false, []string{}, nil, nil},
		{"already blocked", true, []string{"api.github.com"}, []string{"GITHUB_TOKEN"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, func(e *store.Environment) { e.BlockAll, e.AllowDomains = c.wasBlocked, c.allow }, c.secrets...)
			r := configured(t, &environmentResource{}, cp)
			s := resourceSchema(t, r)
			prior := pyEnvironment(t, s, cp, c.wasBlocked, c.allow)
			plan := asPlanned(pyEnvironment(t, s, cp, true, c.allow))
			diags, planned := modifyPlan(t, r, s, &prior, &plan)
			if diags.HasError() {
				t.Fatalf("ModifyPlan failed:\n%s", errorsOf(diags))
			}
			// network is live: turning block_all on never rebuilds.
			var got environmentModel
			if d := planned.Get(t.Context(), &got); d.HasError() {
				t.Fatal(d)
			}
			if got.SnapshotID.ValueString() != prior.SnapshotID.ValueString() || got.Status.ValueString() != sandbox.StatusReady {
				t.Errorf("planned snapshot_id %s, status %s; want the prior %s, Ready", got.SnapshotID, got.Status, prior.SnapshotID)
			}
			w, ok := warningsOf(diags)[summary]
			if c.want == nil {
				if ok {
					t.Fatalf("unexpected warning %q: %s", summary, w.Detail())
				}
				if len(diags.Warnings()) != 0 {
					t.Fatalf("warnings %v; want none", warningSummaries(diags))
				}
				return
			}
			if !ok {
				t.Fatalf("warnings %v; want %q", warningSummaries(diags), summary)
			}
			if len(diags.Warnings()) != 1 {
				t.Errorf("warnings %v; want only %q", warningSummaries(diags), summary)
			}
			for _, frag := range c.want {
				if !strings.Contains(w.Detail(), frag) {
					t.Errorf("warning detail %q lacks %q", w.Detail(), frag)
				}
			}
			wp, ok := w.(diag.DiagnosticWithPath)
			if !ok || !wp.Path().Equal(path.Root("network").AtName("block_all")) {
				t.Errorf("warning is not on network.block_all: %#v", w)
			}
		})
	}
}

func secretPlan(env string) secretModel {
	return secretModel{
		ID: types.StringUnknown(), Environment: types.StringValue(env), EnvName: types.StringValue("GITHUB_TOKEN"),
		Value: types.StringValue("ghp_x"), ValueWO: types.StringNull(), ValueWOVersion: types.Int64Null(),
		Hosts: stringList([]string{"api.github.com"}), Timeouts: secretNullTimeouts(),
	}
}

func TestSecretOnBlockedEnvironmentWarnsAtPlan(t *testing.T) {
	t.Parallel()
	const summary = "Environment Blocks All Network"
	cases := []struct {
		name     string
		env      string
		blockAll bool
		update   bool
		warn     bool
	}{
		{"added to a blocked environment", "py", true, false, true},
		{"added to an open environment", "py", false, false, false},
		{"changed on a blocked environment", "py", true, true, false},
		{"added to an environment created in the same apply", "later", true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, func(e *store.Environment) { e.BlockAll = c.blockAll })
			r := configured(t, &secretResource{}, cp)
			s := resourceSchema(t, r)
			plan := secretPlan(c.env)
			var prior any
			if c.update {
				p := secretPlan(c.env)
				p.ID = types.StringValue(store.SecretID(c.env, "GITHUB_TOKEN"))
				p.Hosts = stringList([]string{"api.github.com", "uploads.github.com"})
				prior = &p
			}
			diags, planned := modifyPlan(t, r, s, prior, &plan)
			if diags.HasError() {
				t.Fatalf("ModifyPlan failed (the refusal belongs to apply, which may turn block_all off first):\n%s", errorsOf(diags))
			}
			var got secretModel
			if d := planned.Get(t.Context(), &got); d.HasError() {
				t.Fatal(d)
			}
			if want := store.SecretID(c.env, "GITHUB_TOKEN"); got.ID.ValueString() != want {
				t.Errorf("planned id %s, want %s", got.ID, want)
			}
			w, ok := warningsOf(diags)[summary]
			if !c.warn {
				if len(diags.Warnings()) != 0 {
					t.Fatalf("warnings %v; want none", warningSummaries(diags))
				}
				return
			}
			if !ok {
				t.Fatalf("warnings %v; want %q", warningSummaries(diags), summary)
			}
			for _, frag := range []string{`Environment "py" has network.block_all = true`, "adding this secret will fail", "Unless this apply turns it off first"} {
				if !strings.Contains(w.Detail(), frag) {
					t.Errorf("warning detail %q lacks %q", w.Detail(), frag)
				}
			}
			if wp, ok := w.(diag.DiagnosticWithPath); !ok || !wp.Path().Equal(path.Root("environment")) {
				t.Errorf("warning is not on environment: %s", fmt.Sprint(w))
			}
		})
	}
}

// testNetwork is a network object with block_all and allow_domains set and the other
// attributes unset.
func testNetwork(blockAll types.Bool, allow types.List) types.Object {
	return types.ObjectValueMust(networkAttrTypes, map[string]attr.Value{
		"block_all": blockAll, "allow_domains": allow,
		"allow_cidrs": types.ListNull(types.StringType), "package_indexes": types.ListNull(types.StringType), "package_indexes_in": types.StringNull(),
	})
}

// nullSettings sets the settings document's attributes of m to typed nulls, as an
// environment that sets none of them is decoded.
func nullSettings(m *environmentModel) {
	m.GPU, m.GPUType, m.Dockerfile, m.BuildContext = types.Int64Null(), types.StringNull(), types.StringNull(), types.StringNull()
	m.Entrypoint, m.Region, m.Registry = types.ListNull(types.StringType), types.StringNull(), types.StringNull()
	m.Labels, m.Volumes = types.MapNull(types.StringType), types.ListNull(types.ObjectType{AttrTypes: volumeAttrTypes})
	m.PackageIndexHosts = types.ListNull(types.StringType)
	m.SharedWith = types.SetNull(types.StringType)
	m.KeepVersions, m.Versions = types.Int64Value(3), types.ListNull(types.ObjectType{AttrTypes: versionAttrTypes})
	m.WarmPool = types.ObjectNull(warmPoolAttrTypes)
	m.Rollout = types.ObjectNull(rolloutAttrTypes)
}
