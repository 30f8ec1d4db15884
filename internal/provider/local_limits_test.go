package provider

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// fakeProbe stands for a host where the user running Terraform has no writable cgroup.
func fakeProbe(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	var out []sandbox.UnenforcedLimit
	if lim.CPU > 0 {
		out = append(out, sandbox.UnenforcedLimit{Limit: "cpu", Reason: "no writable cgroup: running as uid 1000 on a cgroup v1 host"})
	}
	if lim.MemoryMB > 0 {
		out = append(out, sandbox.UnenforcedLimit{Limit: "memory", Reason: "enforced per process only"})
	}
	return out
}

func allEnforced(sandbox.Limits) []sandbox.UnenforcedLimit { return nil }

// limitsDiag returns the plan's one diagnostic about sandbox limits: its severity
// ("warning", "error" or "" for none) and detail. More than one fails the test.
func limitsDiag(t *testing.T, diags diag.Diagnostics) (string, string) {
	t.Helper()
	var kind, detail string
	n := 0
	for _, d := range diags {
		switch d.Summary() {
		case "Sandbox Limits Not Enforced On This Host":
			kind, detail = "warning", d.Detail()
		case "Sandbox Limits Cannot Be Enforced":
			kind, detail = "error", d.Detail()
		default:
			if d.Severity() == diag.SeverityError {
				t.Fatalf("unexpected error %s: %s", d.Summary(), d.Detail())
			}
			continue
		}
		n++
	}
	if n > 1 {
		t.Fatalf("%d diagnostics about sandbox limits; want at most one: %v", n, diags)
	}
	return kind, detail
}

// setLimitsProbe makes cp's local backend see the host through probe.
func setLimitsProbe(cp *controlPlane, probe func(sandbox.Limits) []sandbox.UnenforcedLimit) {
	reg := backends.Default()
	reg[local.Type] = &local.Backend{Probe: probe}
	cp.backends = reg
}

// rootDefault is what an unset require_limits means for this test process.
func rootDefault() string {
	if os.Geteuid() == 0 {
		return "error"
	}
	return "warning"
}

func TestEnvironmentPlanSaysWhichLimitsAreNotEnforced(t *testing.T) {
	t.Parallel()
	yes, no := "true", "false"
	cases := []struct {
		name    string
		require *string // the provider's require_limits; nil: unset
		probe   func(sandbox.Limits) []sandbox.UnenforcedLimit
		create  bool
		resize  bool
		want    string
	}{
		{"create, not required", &no, fakeProbe, true, false, "warning"},
		{"create, required", &yes, fakeProbe, true, false, "error"},
		{"create, unset", nil, fakeProbe, true, false, rootDefault()},
		{"resize, not required", &no, fakeProbe, false, true, "warning"},
		{"env only change", &no, fakeProbe, false, false, ""},
		{"everything enforced", &yes, allEnforced, true, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, nil)
			if c.require != nil {
				f.exec(`UPDATE sandbox_providers SET require_limits = ?`, *c.require == "true")
			}
			setLimitsProbe(cp, c.probe)
			r := configured(t, &environmentResource{}, cp)
			s := resourceSchema(t, r)
			prior := pyEnvironment(t, s, cp, false, nil)
			plan := asPlanned(pyEnvironment(t, s, cp, false, nil))
			plan.Env = stringMap(map[string]string{"GREETING": "hi"})
			if c.resize {
				plan.CPU, plan.Memory = types.Int64Value(2), types.Int64Value(4)
			}
			var diags diag.Diagnostics
			if c.create {
				plan.Owner = types.StringUnknown()
				diags, _ = modifyPlan(t, r, s, nil, &plan)
			} else {
				diags, _ = modifyPlan(t, r, s, &prior, &plan)
			}
			kind, detail := limitsDiag(t, diags)
			if kind != c.want {
				t.Fatalf("diagnostic %q (%s); want %q", kind, detail, c.want)
			}
			if kind == "" {
				return
			}
			size := "(1 CPU, 1 GB memory, 3 GB disk)"
			if c.resize {
				size = "(2 CPU, 4 GB memory, 3 GB disk)"
			}
			want := []string{`environment "py" ` + size, "cpu, memory limit(s)", "  - cpu: no writable cgroup: running as uid 1000",
				"  - memory: enforced per process only", "as root", "delegated cgroup v2", "Delegate=yes"}
			if kind == "warning" {
				want = append(want, "still start", "sandbox_provisioned", "require_limits = true")
			} else {
				want = append(want, `Sandbox provider "local" requires limits`, "would refuse", "require_limits = false")
				if c.require == nil {
					want = append(want, "unset and Terraform runs as root")
				}
			}
			for _, w := range want {
				if !strings.Contains(detail, w) {
					t.Errorf("detail %q lacks %q", detail, w)
				}
			}
		})
	}
}

// localProviderPlan is a local sandbox provider as Terraform proposes it for a create.
func localProviderPlan(t *testing.T, require types.Bool) sandboxProviderModel {
	r := &sandboxProviderResource{}
	return sandboxProviderModel{
		ID: types.StringUnknown(), Name: types.StringValue("local"), Type: types.StringValue("local"),
		APIURL: types.StringNull(), APIKey: types.StringNull(), APIKeyWO: types.StringNull(), APIKeyWOVersion: types.Int64Null(),
		Target: types.StringNull(), Scopes: types.ListUnknown(types.StringType), ReleaseSnapshot: types.StringUnknown(),
		DefaultEnvironment: types.StringUnknown(), Status: types.StringUnknown(), RequireLimits: require,
		Timeouts: nullTimeouts(t, resourceSchema(t, r)),
	}
}

func TestSandboxProviderPlanSaysWhichLimitsAreNotEnforced(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		prior *types.Bool // nil: a create
		plan  types.Bool
		typ   string
		probe func(sandbox.Limits) []sandbox.UnenforcedLimit
		want  string
	}{
		{"create, not required", nil, types.BoolValue(false), "local", fakeProbe, "warning"},
		{"create, required", nil, types.BoolValue(true), "local", fakeProbe, "error"},
		{"create, unset", nil, types.BoolNull(), "local", fakeProbe, rootDefault()},
		{"create, everything enforced", nil, types.BoolValue(true), "local", allEnforced, ""},
		{"require_limits turned on", ptr(types.BoolNull()), types.BoolValue(true), "local", fakeProbe, "error"},
		{"require_limits unchanged", ptr(types.BoolValue(false)), types.BoolValue(false), "local", fakeProbe, ""},
		{"daytona", nil, types.BoolNull(), "daytona", fakeProbe, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp, _ := f.controlPlane()
			setLimitsProbe(cp, c.probe)
			r := configured(t, &sandboxProviderResource{}, cp)
			s := resourceSchema(t, r)
			plan := localProviderPlan(t, c.plan)
			plan.Type = types.StringValue(c.typ)
			var prior any
			if c.prior != nil {
				p := localProviderPlan(t, *c.prior)
				p.ID, p.Scopes, p.ReleaseSnapshot = types.StringValue("local"), stringList(nil), types.StringValue("release-0000000000000000")
				p.DefaultEnvironment, p.Status = types.StringValue(defaultEnvironmentName), types.StringValue(sandbox.StatusReady)
				prior = &p
				plan.ID, plan.Scopes, plan.ReleaseSnapshot, plan.DefaultEnvironment, plan.Status = p.ID, p.Scopes, p.ReleaseSnapshot, p.DefaultEnvironment, p.Status
			}
			diags, _ := modifyPlan(t, r, s, prior, &plan)
			kind, detail := limitsDiag(t, diags)
			if kind != c.want {
				t.Fatalf("diagnostic %q (%s); want %q", kind, detail, c.want)
			}
			if kind != "" && !strings.Contains(detail, `environment "default" (1 CPU, 1 GB memory, 3 GB disk)`) {
				t.Errorf("detail %q does not name the default environment's sandboxes", detail)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
