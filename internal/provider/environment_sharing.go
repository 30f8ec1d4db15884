package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Who may use an environment with secrets (store.Environment.UsableBy): its owner's
// agents and those of the owners its shared_with names. The provider refuses the rest
// at plan and apply (checkEnvironmentSharing), PostgreSQL's row-level security refuses
// their rows (migration 14), and the harness refuses them at run time whatever the rows
// say, which is what stops a secret added, or an owner unshared, after another owner's
// agent selected the environment.

// checkEnvironmentSharing adds an error on sandbox.environment when agent, applied by
// owner who, may not use env. It reports whether it may.
func checkEnvironmentSharing(agent, who string, env store.Environment, diags *diag.Diagnostics) bool {
	if env.UsableBy(who) {
		return true
	}
	fix := fmt.Sprintf("Ask %q to add %q to the environment's shared_with (shared_with = [%q], or [\"*\"] for every owner) and apply it, "+
		"or select an environment of your own.", env.Owner, who, who)
	if env.Reserved {
		// The default environment has no shared_with: its secrets are its sandbox
		// provider's owner's alone.
		fix = fmt.Sprintf("The default environment's secrets serve only its sandbox provider's owner %q: ask them to move the secrets to a "+
			"trueforge_environment with shared_with = [%q], and select that environment, or select an environment of your own.", env.Owner, who)
	}
	diags.AddAttributeError(path.Root("sandbox").AtName("environment"), "Environment Not Shared With This Owner",
		fmt.Sprintf("Agent %q selects environment %q (sandbox.environment), owned by %q, which has secrets and does not share them with %q. "+
			"An environment's secrets are sent by the egress proxy for its owner's agents and the owners its shared_with names only. %s",
			agent, env.Name, env.Owner, who, fix))
	return false
}

// warnUnshared warns, when an environment with secrets stops being shared with an owner
// whose agents use it, that those agents lose it: the harness refuses them until the
// environment is shared again or they select another. Unsharing is not refused:
// consent is the owner's to withdraw.
func (r *environmentResource) warnUnshared(ctx context.Context, name string, before, after []string, diags *diag.Diagnostics) {
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if err != nil || !env.HasSecrets {
		return
	}
	names, err := r.cp.store.AgentsUsing(ctx, name)
	if err != nil {
		return
	}
	var lost []string
	for _, n := range names {
		a, err := r.cp.store.GetAgent(ctx, n)
		if err != nil {
			continue
		}
		if store.UsableBy(env.Owner, before, a.Owner) && !store.UsableBy(env.Owner, after, a.Owner) {
			lost = append(lost, fmt.Sprintf("%s (owner %s)", a.Name, a.Owner))
		}
	}
	if len(lost) == 0 {
		return
	}
	diags.AddAttributeWarning(path.Root("shared_with"), "Agents Lose This Environment",
		fmt.Sprintf("Environment %q has secrets and will no longer be shared with the owners of agent(s) %s. The harness will refuse to create sandboxes for them "+
			"and its egress proxy stops sending the secrets for their running sandboxes; their owners must select another environment, or keep them in shared_with.",
			name, strings.Join(lost, ", ")))
}
