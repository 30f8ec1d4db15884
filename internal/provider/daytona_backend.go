package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/trueforge/terraform-provider-trueforge/internal/catalog"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// typeDaytona is the catalog type of the Daytona backend.
const typeDaytona = "daytona"

// daytonaAPIURL is the API base URL of a daytona provider: api_url, else the catalog's.
func daytonaAPIURL(p store.SandboxProvider) string {
	if p.APIURL != "" {
		return p.APIURL
	}
	e, _ := catalog.Lookup(typeDaytona)
	return e.DefaultAPIURL
}

// newDaytonaClient returns a client for the provider's API with key, plus the options the
// provider was started with (tests shorten polling and backoff there).
func (cp *controlPlane) newDaytonaClient(p store.SandboxProvider, key string) *daytona.Client {
	opts := []daytona.Option{daytona.WithTarget(p.Target)}
	opts = append(opts, cp.daytonaOpts...)
	return daytona.New(daytonaAPIURL(p), key, opts...)
}

// daytonaClient opens the provider's sealed API key and returns a client for its API.
func (cp *controlPlane) daytonaClient(p store.SandboxProvider) (*daytona.Client, error) {
	if len(p.APIKeyEnc) == 0 {
		return nil, fmt.Errorf("sandbox provider %q has no stored API key; set api_key_wo (with a new api_key_wo_version) or api_key and apply", p.Name)
	}
	box, err := cp.secretBox()
	if err != nil {
		return nil, fmt.Errorf("opening the API key of sandbox provider %q: %w", p.Name, err)
	}
	key, err := box.Open(p.APIKeyEnc, "sandbox_provider/"+p.Name)
	if err != nil {
		return nil, fmt.Errorf("opening the API key of sandbox provider %q (was the secret key changed?): %w", p.Name, err)
	}
	return cp.newDaytonaClient(p, string(key)), nil
}

// environmentDaytona returns the Daytona client of the environment's sandbox provider, or
// nil when that provider is not a Daytona one (or the environment does not exist yet).
func (cp *controlPlane) environmentDaytona(ctx context.Context, environment string) (*daytona.Client, error) {
	env, err := cp.store.GetEnvironment(ctx, environment)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := cp.store.GetSandboxProvider(ctx, env.Provider)
	if err != nil || p.Type != typeDaytona {
		return nil, err
	}
	return cp.daytonaClient(p)
}

// checkDaytonaKey asks Daytona about key (GET /api-keys/current) and returns the
// permissions it holds. It fails, naming each missing scope, unless the key has every
// scope in catalog.DaytonaScopes.
func (cp *controlPlane) checkDaytonaKey(ctx context.Context, p store.SandboxProvider, key string, diags *diag.Diagnostics) ([]string, bool) {
	c := cp.newDaytonaClient(p, key)
	k, err := c.RequirePermissions(ctx, catalog.DaytonaScopes...)
	var miss *daytona.MissingPermissionsError
	switch {
	case errors.As(err, &miss):
		diags.AddAttributeError(path.Root("api_key"), "Daytona API Key Missing Scopes", missingScopesDetail(miss.KeyName, miss.Missing))
		return nil, false
	case hasHTTPStatus(err, http.StatusUnauthorized):
		diags.AddAttributeError(path.Root("api_key"), "Invalid Daytona API Key",
			fmt.Sprintf("Daytona at %s rejected the API key (401). Check that the key is current and belongs to this API, then apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err))
		return nil, false
	case hasHTTPStatus(err, http.StatusForbidden):
		diags.AddAttributeError(path.Root("api_key"), "Daytona API Key Required",
			fmt.Sprintf("Daytona at %s would not describe the credential (403): api_key must be a Daytona API key (dtn_...), not a JWT. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err))
		return nil, false
	case err != nil:
		diags.AddAttributeError(path.Root("api_url"), "Unable To Reach Daytona",
			fmt.Sprintf("Checking the API key at %s failed. Check api_url and the network, then apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err))
		return nil, false
	}
	var cannot []string
	for _, scope := range daytonaDeleteScopes {
		if !slices.Contains(k.Permissions, scope) {
			cannot = append(cannot, scope)
		}
	}
	if len(cannot) > 0 {
		// Not required (the product asks for the three scopes above), but without them a
		// failed snapshot cannot be rebuilt under its name, old snapshots pile up, and
		// sandboxes are never deleted (the harness deletes them; Daytona itself never does).
		diags.AddAttributeWarning(path.Root("api_key"), "Daytona API Key Cannot Delete",
			fmt.Sprintf("The Daytona API key %q lacks %s. It is accepted, but trueforge then cannot delete snapshots (retry a failed build "+
				"with the same inputs, collect unused snapshots, delete the provider's) or sandboxes (the harness's idle delete "+
				"and cleanup of failed creates), so those pile up in your Daytona organization. Add the scope(s) to the key, "+
				"or change triggers to retry a failed build.", k.Name, strings.Join(cannot, " and ")))
	}
	return k.Permissions, true
}

// daytonaDeleteScopes are the scopes trueforge uses beyond catalog.DaytonaScopes: it
// deletes snapshots and sandboxes it made.
var daytonaDeleteScopes = []string{"delete:snapshots", "delete:sandboxes"}

// missingScopesDetail is the detail of the missing-scope diagnostic: every missing scope
// by name, the full set needed and what to do.
func missingScopesDetail(keyName string, missing []string) string {
	return fmt.Sprintf("The Daytona API key %q lacks the scope(s) %s. trueforge needs %s: it builds snapshots, "+
		"creates sandboxes from them and syncs secrets. Create a key with those scopes in the Daytona dashboard "+
		"(API Keys), set it as api_key_wo (with a new api_key_wo_version) or api_key, and apply again. Nothing was stored.",
		keyName, strings.Join(missing, ", "), strings.Join(catalog.DaytonaScopes, ", "))
}

func hasHTTPStatus(err error, status int) bool {
	var e *daytona.APIError
	return errors.As(err, &e) && e.Status == status
}

// defaultSnapshotFailed refreshes the default environment's snapshot (one read) and
// reports whether it is Failed: deleted, deactivated or broken in Daytona. It adds an
// error diagnostic, as an environment's refresh does, when Daytona did not answer.
func (r *sandboxProviderResource) defaultSnapshotFailed(ctx context.Context, p store.SandboxProvider, def store.Environment, diags *diag.Diagnostics) bool {
	coord, _, err := r.cp.coordinator(ctx, p.Name)
	if err != nil {
		addOperationError(diags, "Error Reading Sandbox Provider", fmt.Sprintf("sandbox provider %q, opening its Daytona client", p.Name), err)
		return false
	}
	snap, err := coord.Refresh(ctx, def.SnapshotID)
	if err != nil {
		diags.AddError("Error Reading Environment Snapshot", daytonaReadError(def.Name, def.SnapshotID, err))
		return false
	}
	return snap.Status == sandbox.StatusFailed
}

// rebuildDefaultSnapshot brings the default environment's snapshot back (re-activating or
// rebuilding it) and waits for it.
func (r *sandboxProviderResource) rebuildDefaultSnapshot(ctx context.Context, p store.SandboxProvider) error {
	coord, _, err := r.cp.coordinator(ctx, p.Name)
	if err != nil {
		return err
	}
	snap, err := coord.Ensure(ctx, defaultSpec, p.ReleaseSnapshot, false)
	if err != nil {
		return err
	}
	if snap, err = coord.Wait(ctx, snap.ID); err != nil {
		return err
	}
	if snap.Status != sandbox.StatusReady {
		return fmt.Errorf("the snapshot of the default environment failed: %s\n\nBuild log (tail):\n%s", snap.Reason, snap.LogTail)
	}
	return nil
}
