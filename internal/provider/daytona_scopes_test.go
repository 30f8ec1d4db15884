package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A key with exactly the three scopes the product asks for is accepted, with a warning
// that names the delete scopes it lacks and what that costs; a key with them gets none.
func TestDaytonaKeyWithoutDeleteScopesWarns(t *testing.T) {
	f := newDaytonaFixture(t)
	f.srv.AddKey("dtn_three_scopes", "write:sandboxes", "write:snapshots", "manage:secrets")
	cp, _ := f.controlPlane()
	p := store.SandboxProvider{Name: "daytona", Type: typeDaytona, APIURL: f.srv.URL()}

	var diags diag.Diagnostics
	if _, ok := cp.checkDaytonaKey(t.Context(), p, "dtn_three_scopes", &diags); !ok || diags.HasError() {
		t.Fatalf("a key with the three required scopes was refused: %v", diags)
	}
	if len(diags) != 1 || diags[0].Summary() != "Daytona API Key Cannot Delete" ||
		!strings.Contains(diags[0].Detail(), "delete:snapshots and delete:sandboxes") {
		t.Fatalf("diagnostics %v; want one warning naming both delete scopes", diags)
	}

	diags = nil
	if _, ok := cp.checkDaytonaKey(t.Context(), p, f.key, &diags); !ok || len(diags) != 0 {
		t.Fatalf("the full key: ok %v, diagnostics %v; want no warning", ok, diags)
	}
}
