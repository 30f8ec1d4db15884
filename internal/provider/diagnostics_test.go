package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// An operation error says what failed on which object, why, and what to do next; the
// next step fits the cause.
func TestOperationErrorSaysWhatNext(t *testing.T) {
	for _, c := range []struct {
		err  error
		next string
	}{
		{fmt.Errorf("environment %q: %w", "py", store.ErrNotFound), "removed outside Terraform"},
		{fmt.Errorf("creating snapshot: %w", &daytona.APIError{Method: "POST", URL: "https://x/api/snapshots", Status: 500}), "Check the sandbox provider's api_key, api_url and target"},
		{fmt.Errorf("updating environment: %w", storetest.BusyError(t)), "busy timeout"},
		{errors.New("disk I/O error"), "database_url, else TRUEFORGE_DATABASE_URL"},
	} {
		var diags diag.Diagnostics
		addOperationError(&diags, "Error Updating Environment", `environment "py"`, c.err)
		if len(diags) != 1 {
			t.Fatalf("%d diagnostics", len(diags))
		}
		d := diags[0].Detail()
		if diags[0].Summary() != "Error Updating Environment" || !strings.HasPrefix(d, `environment "py": `+c.err.Error()) || !strings.Contains(d, c.next) {
			t.Errorf("%v:\n%s\n%s", c.err, diags[0].Summary(), d)
		}
	}
}
