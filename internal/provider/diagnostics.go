package provider

import (
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// addOperationError reports a failure that is not a configuration problem (the
// control-plane database or a backend failed while acting on object) in the HashiCorp
// shape: what failed on which object, the cause, and what to do next.
func addOperationError(diags *diag.Diagnostics, summary, object string, err error) {
	diags.AddError(summary, fmt.Sprintf("%s: %v\n\n%s", object, err, nextStep(err)))
}

// nextStep says what a user can do about err.
func nextStep(err error) string {
	var api sandbox.APIError
	switch {
	case errors.Is(err, store.ErrForbidden):
		return "The PostgreSQL control plane refused this database role (its answer is above): each role may change only what it created, " +
			"and team roles may not touch the harness's tables. Apply as the role that owns the object, or, if the role lacks the trueforge grants, " +
			"have the database's owner run `trueforge-harness db roles --team <role> --apply`."
	case errors.Is(err, store.ErrNotFound):
		return "It was removed outside Terraform while this command ran. Run terraform plan again: the refresh shows what is left, and apply recreates what is missing."
	case errors.As(err, &api):
		return api.Backend() + "'s API refused or failed the request (its answer is above). Check the sandbox provider's api_key, api_url and target, and " + api.Backend() + "'s status, then run terraform apply again."
	case store.IsBusy(err):
		return "Another process held the control-plane database for longer than the busy timeout. Wait for it to finish (or stop it), then run the command again."
	default:
		return "Check that the control-plane database (database_url, else TRUEFORGE_DATABASE_URL) is on a writable, not full, file system and that the sandbox provider's backend is reachable, then run terraform apply again. If it persists, run with TF_LOG=debug and report the output."
	}
}
