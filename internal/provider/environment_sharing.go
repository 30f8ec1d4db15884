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
// owner who, may not use env: its secrets, or one of the volumes it mounts, are another
// owner's and not shared with who. It reports whether it may.
func checkEnvironmentSharing(ctx context.Context, st *store.Store, agent, who string, env store.Environment, diags *diag.Diagnostics) bool {
	if !env.UsableBy(who) {
		addEnvironmentNotShared(agent, who, env, diags)
		return false
	}
	vol, unusable, err := st.UnusableVolume(ctx, env, who)
	if err != nil || !unusable {
		return true // a volume that cannot be read now is the harness's to refuse
	}
	diags.AddAttributeError(path.Root("sandbox").AtName("environment"), "Volume Not Shared With This Owner",
		fmt.Sprintf("Agent %q selects environment %q (sandbox.environment), which mounts volume %q, owned by %q and not shared with %q. "+
			"A volume serves only its owner's agents and those of the owners its shared_with names, whichever environment mounts it. "+
			"Ask %q to add %q to the volume's shared_with and apply it, or select an environment that does not mount it.",
			agent, env.Name, vol.Name, vol.Owner, who, vol.Owner, who))
	return false
}

// addEnvironmentNotShared is the error of an agent on an environment whose secrets its
// owner does not share with who.
func addEnvironmentNotShared(agent, who string, env store.Environment, diags *diag.Diagnostics) {
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
}

// warnUnshared warns, when an environment with secrets stops being shared with an owner
// whose agents use it, that those agents lose it: the harness refuses them until the
// environment is shared again or they select another. Unsharing is not refused:
// consent is the owner's to withdraw.
func (r *environmentResource) warnUnshared(ctx context.Context, name string, after []string, diags *diag.Diagnostics) {
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if err != nil || !env.HasSecrets {
		return
	}
	lost := agentsLosing(ctx, r.cp.store, env, func(who string) bool { return store.UsableBy(env.Owner, after, who) })
	if len(lost) == 0 {
		return
	}
	diags.AddAttributeWarning(path.Root("shared_with"), "Agents Lose This Environment",
		fmt.Sprintf("Environment %q has secrets and will no longer be shared with the owners of agent(s) %s. The harness will refuse to create sandboxes for them "+
			"and its egress proxy stops sending the secrets for their running sandboxes; their owners must select another environment, or keep them in shared_with.",
			name, strings.Join(lost, ", ")))
}

// warnFirstSecret warns, when a secret is added to an environment without secrets that
// other owners' agents use and shared_with does not name, that those agents lose it.
// Adding it is not refused: the secret is the owner's.
func warnFirstSecret(ctx context.Context, st *store.Store, env store.Environment, diags *diag.Diagnostics) {
	if env.HasSecrets {
		return // whom it serves does not change
	}
	lost := agentsLosing(ctx, st, env, func(who string) bool { return store.UsableBy(env.Owner, env.SharedWith, who) })
	if len(lost) == 0 {
		return
	}
	diags.AddAttributeWarning(path.Root("environment"), "Agents Lose This Environment",
		fmt.Sprintf("Environment %q has no secrets yet and is used by agent(s) %s of other owners, which its shared_with does not name. Once this secret is added, "+
			"the harness refuses to create sandboxes for them; add their owners to the environment's shared_with if they should keep it.",
			env.Name, strings.Join(lost, ", ")))
}

// agentsLosing lists, as "name (owner owner)", the agents on env whose owners may use it
// now and would not where usable says no.
func agentsLosing(ctx context.Context, st *store.Store, env store.Environment, usable func(who string) bool) []string {
	names, err := st.AgentsUsing(ctx, env.Name)
	if err != nil {
		return nil
	}
	var lost []string
	for _, n := range names {
		a, err := st.GetAgent(ctx, n)
		if err != nil {
			continue
		}
		if env.UsableBy(a.Owner) && !usable(a.Owner) {
			lost = append(lost, fmt.Sprintf("%s (owner %s)", a.Name, a.Owner))
		}
	}
	return lost
}
