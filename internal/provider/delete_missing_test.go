package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Unit tests of Delete for an object that is already gone (deleted outside Terraform
// after the last refresh, or by a concurrent apply): every resource treats not-found as
// done, so the destroy succeeds and Terraform forgets the object.

// seededControlPlane stores, without any backend, what an applied configuration leaves
// behind: sandbox provider "local" with its reserved default environment, environment
// "py" (both on one Ready snapshot), secret py/GITHUB_TOKEN and agent "helper" on py.
// edit may change py before it is stored.
func seededControlPlane(t *testing.T, f *controlPlaneFixture, edit func(*store.Environment), secrets ...string) *controlPlane {
	t.Helper()
	ctx := t.Context()
	cp, _ := f.controlPlane()
	if err := cp.store.CreateSandboxProvider(ctx, store.SandboxProvider{
		Name: "local", Type: "local", ReleaseSnapshot: "release-0000000000000000", Status: sandbox.StatusReady, Owner: f.owner,
	}); err != nil {
		t.Fatal(err)
	}
	hash := defaultSpec.BuildHash()
	snap := "snap-" + hash[:20]
	f.exec(`INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES (?, 'local', ?, '{}', 'Ready', 0, 0)`, snap, hash)
	for _, name := range []string{defaultEnvironmentName, "py"} {
		env := store.Environment{
			ID: newID("env"), Name: name, Provider: "local", Owner: f.owner, Reserved: name == defaultEnvironmentName,
			Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: hash, SnapshotID: snap,
		}
		if name == "py" && edit != nil {
			edit(&env)
		}
		if err := cp.store.CreateEnvironment(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	box, err := cp.plane.SecretBox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range secrets {
		id := store.SecretID("py", name)
		sealed, err := box.Seal([]byte("value-of-"+name), "secret/"+id)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.store.CreateSecret(ctx, store.Secret{ID: id, Environment: "py", EnvName: name, Hosts: []string{"api.github.com"}, ValueEnc: sealed}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.store.CreateAgent(ctx, store.Agent{ID: newID("agent"), Name: "helper", Owner: f.owner, Environment: "py", Spec: []byte(`{"name":"helper"}`)}); err != nil {
		t.Fatal(err)
	}
	return cp
}

// resourceSchema returns the schema r declares.
func resourceSchema(t *testing.T, r resource.Resource) schema.Schema {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(t.Context(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("schema: %v", resp.Diagnostics)
	}
	return resp.Schema
}

// nullTimeouts is a null timeouts attribute of s, typed as s declares it.
func nullTimeouts(t *testing.T, s schema.Schema) timeouts.Value {
	t.Helper()
	typ, ok := s.Attributes["timeouts"].GetType().(timeouts.Type)
	if !ok {
		t.Fatalf("timeouts attribute is %T", s.Attributes["timeouts"].GetType())
	}
	return timeouts.Value{Object: types.ObjectNull(typ.AttrTypes)}
}

// stateOf encodes model as a state of schema s, as the framework does.
func stateOf(t *testing.T, s schema.Schema, model any) tfsdk.State {
	t.Helper()
	st := tfsdk.State{Schema: s, Raw: tftypes.NewValue(s.Type().TerraformType(t.Context()), nil)}
	if d := st.Set(t.Context(), model); d.HasError() {
		t.Fatalf("encoding the state: %v", d)
	}
	return st
}

// configured returns r configured with cp, as the provider's Configure hands it over.
func configured[R resource.ResourceWithConfigure](t *testing.T, r R, cp *controlPlane) R {
	t.Helper()
	var resp resource.ConfigureResponse
	r.Configure(t.Context(), resource.ConfigureRequest{ProviderData: cp}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("configure: %v", resp.Diagnostics)
	}
	return r
}

func errorsOf(d diag.Diagnostics) string {
	var out []string
	for _, e := range d.Errors() {
		out = append(out, e.Summary()+": "+e.Detail())
	}
	return strings.Join(out, "\n")
}

// missingEnvironment is the state of an environment "ghost" whose row, and snapshot, do
// not exist.
func missingEnvironment(t *testing.T, s schema.Schema, provider string) environmentModel {
	m := environmentModel{
		ID: types.StringValue("ghost"), Name: types.StringValue("ghost"), SandboxProvider: types.StringValue(provider),
		Image: types.StringValue(sandbox.PlatformImage), BuildScript: types.StringValue("echo gone"),
		CPU: types.Int64Value(1), Memory: types.Int64Value(1), Disk: types.Int64Value(3),
		Triggers: types.MapNull(types.StringType), Env: types.MapValueMust(types.StringType, map[string]attr.Value{"MODE": types.StringValue("a")}),
		Network:      testNetwork(types.BoolValue(false), stringList([]string{"api.github.com"})),
		WaitForReady: types.BoolValue(true), SnapshotID: types.StringValue("snap-ffffffffffffffffffff"), BuildHash: types.StringValue(strings.Repeat("f", 64)),
		Status: types.StringValue(sandbox.StatusReady), Owner: types.StringValue("alice"), Timeouts: nullTimeouts(t, s),
	}
	nullSettings(&m)
	return m
}

func missingSecret(env, name string) secretModel {
	return secretModel{
		ID: types.StringValue(store.SecretID(env, name)), Environment: types.StringValue(env), EnvName: types.StringValue(name),
		Value: types.StringValue("gone-value"), ValueWO: types.StringNull(), ValueWOVersion: types.Int64Null(),
		Hosts: stringList([]string{"api.github.com"}), Timeouts: secretNullTimeouts(),
	}
}

// secretNullTimeouts is a secret's timeouts left out of the configuration.
func secretNullTimeouts() timeouts.Value {
	var resp resource.SchemaResponse
	NewSecretResource().Schema(context.Background(), resource.SchemaRequest{}, &resp)
	return timeouts.Value{Object: types.ObjectNull(resp.Schema.Attributes["timeouts"].GetType().(timeouts.Type).AttrTypes)}
}

func missingAgent(name string) agentModel {
	return agentModel{
		ID: types.StringValue(name), Name: types.StringValue(name), Owner: types.StringValue("alice"),
		CodeMode: types.BoolValue(false), Description: types.StringNull(), Instructions: types.StringValue("Be brief."),
		MaxTurns: types.Int64Value(agentspec.DefaultMaxTurns), TokenBudget: types.Int64Value(agentspec.DefaultTokenBudget),
		MCPServers: types.ListNull(types.ObjectType{AttrTypes: mcpServerAttrTypes}),
		Skills:     types.ListNull(types.ObjectType{AttrTypes: skillAttrTypes}),
		Model: types.ObjectValueMust(modelSettingsAttrTypes, map[string]attr.Value{
			"api_key_credential": types.StringNull(), "api_key_env": types.StringNull(), "base_url": types.StringNull(), "name": types.StringNull(),
			"provider": types.StringValue(agentspec.ModelScripted), "script": types.StringValue("[]"),
		}),
		Sandbox:        defaultAgentSandbox(),
		CodeModeLimits: codeModeLimitsObject(agentspec.DefaultCodeModeLimits()),
	}
}

func missingSandboxProvider(t *testing.T, s schema.Schema, name string) sandboxProviderModel {
	return sandboxProviderModel{
		ID: types.StringValue(name), Name: types.StringValue(name), Type: types.StringValue("local"),
		APIURL: types.StringNull(), APIKey: types.StringNull(), APIKeyWO: types.StringNull(), APIKeyWOVersion: types.Int64Null(),
		Target: types.StringNull(), Scopes: stringList([]string{"write:sandboxes"}), ReleaseSnapshot: types.StringValue("release-ffffffffffffffff"),
		DefaultEnvironment: types.StringValue(defaultEnvironmentName), Status: types.StringValue(sandbox.StatusReady), Timeouts: nullTimeouts(t, s),
	}
}

// expectSeedIntact fails when deleting a missing object touched what the seed stored.
func expectSeedIntact(t *testing.T, f *controlPlaneFixture) {
	t.Helper()
	ctx := t.Context()
	st := f.store()
	if _, err := st.GetSandboxProvider(ctx, "local"); err != nil {
		t.Errorf("sandbox provider local: %v", err)
	}
	for _, env := range []string{defaultEnvironmentName, "py"} {
		if _, err := st.GetEnvironment(ctx, env); err != nil {
			t.Errorf("environment %s: %v", env, err)
		}
	}
	if _, err := st.GetSecret(ctx, "py/GITHUB_TOKEN"); err != nil {
		t.Errorf("secret py/GITHUB_TOKEN: %v", err)
	}
	if _, err := st.GetAgent(ctx, "helper"); err != nil {
		t.Errorf("agent helper: %v", err)
	}
}

func TestDeleteOfMissingObjectIsDone(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		typeName string
		new      func() resource.Resource
		model    func(t *testing.T, s schema.Schema) any
	}{
		{"sandbox provider", "trueforge_sandbox_provider", NewSandboxProviderResource, func(t *testing.T, s schema.Schema) any {
			m := missingSandboxProvider(t, s, "ghost")
			return &m
		}},
		{"environment with a missing snapshot", "trueforge_environment", NewEnvironmentResource, func(t *testing.T, s schema.Schema) any {
			m := missingEnvironment(t, s, "local")
			return &m
		}},
		{"environment of a missing sandbox provider", "trueforge_environment", NewEnvironmentResource, func(t *testing.T, s schema.Schema) any {
			m := missingEnvironment(t, s, "gone")
			return &m
		}},
		{"secret of an existing environment", "trueforge_secret", NewSecretResource, func(*testing.T, schema.Schema) any {
			m := missingSecret("py", "GHOST_TOKEN")
			return &m
		}},
		{"secret of a missing environment", "trueforge_secret", NewSecretResource, func(*testing.T, schema.Schema) any {
			m := missingSecret("ghost", "GITHUB_TOKEN")
			return &m
		}},
		{"agent", "trueforge_agent", NewAgentResource, func(*testing.T, schema.Schema) any {
			m := missingAgent("ghost")
			return &m
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, nil, "GITHUB_TOKEN")
			r := c.new()
			s := resourceSchema(t, r)
			prior := stateOf(t, s, c.model(t, s))

			// Delete itself, called as the framework calls it: the response starts out
			// holding the prior state.
			rc := configured(t, r.(resource.ResourceWithConfigure), cp)
			resp := resource.DeleteResponse{State: tfsdk.State{Schema: s, Raw: prior.Raw.Copy()}}
			rc.Delete(t.Context(), resource.DeleteRequest{State: prior}, &resp)
			if resp.Diagnostics.HasError() {
				t.Fatalf("Delete of a missing %s failed:\n%s", c.name, errorsOf(resp.Diagnostics))
			}
			if !resp.State.Raw.IsNull() && !resp.State.Raw.Equal(prior.Raw) {
				t.Fatalf("Delete wrote a new state for a missing object: %s", resp.State.Raw)
			}

			// The same destroy through the provider server, as Terraform sends it: the
			// object leaves the state.
			newState, diags := destroyThroughServer(t, f, c.typeName, prior)
			for _, d := range diags {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					t.Fatalf("destroy of a missing %s failed: %s: %s", c.name, d.Summary, d.Detail)
				}
			}
			if !newState.IsNull() {
				t.Fatalf("destroy of a missing %s left state %s", c.name, newState)
			}
			expectSeedIntact(t, f)
		})
	}
}

// destroyThroughServer configures the provider server for f and sends the destroy of prior
// (ApplyResourceChange with a null planned state), returning the new state.
func destroyThroughServer(t *testing.T, f *controlPlaneFixture, typeName string, prior tfsdk.State) (tftypes.Value, []*tfprotov6.Diagnostic) {
	t.Helper()
	ctx := t.Context()
	srv := providerserver.NewProtocol6(New("test")())()
	schemas, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	providerType := schemas.Provider.ValueType().(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, typ := range providerType.AttributeTypes {
		vals[name] = tftypes.NewValue(typ, nil)
	}
	vals["database_url"] = tftypes.NewValue(tftypes.String, f.dbURL)
	vals["owner"] = tftypes.NewValue(tftypes.String, f.owner)
	cfg, err := tfprotov6.NewDynamicValue(providerType, tftypes.NewValue(providerType, vals))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.11.4", Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if msg := protoErrors(conf.Diagnostics); msg != "" {
		t.Fatalf("configuring the provider: %s", msg)
	}
	resSchema, ok := schemas.ResourceSchemas[typeName]
	if !ok {
		t.Fatalf("no schema for %s", typeName)
	}
	typ := resSchema.ValueType()
	priorDV, err := tfprotov6.NewDynamicValue(typ, prior.Raw)
	if err != nil {
		t.Fatal(err)
	}
	null, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{
		TypeName: typeName, PriorState: &priorDV, PlannedState: &null, Config: &null,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NewState == nil {
		return tftypes.NewValue(typ, nil), resp.Diagnostics
	}
	v, err := resp.NewState.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	return v, resp.Diagnostics
}

func protoErrors(diags []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			out = append(out, fmt.Sprintf("%s: %s", d.Summary, d.Detail))
		}
	}
	return strings.Join(out, "\n")
}
