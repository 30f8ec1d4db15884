package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ErrEnvironmentNotShared is returned (wrapped) when an agent's owner may not use the
// environment a sandbox would be made from: it has secrets its owner has not shared
// with them (store.Environment.UsableBy).
var ErrEnvironmentNotShared = errors.New("environment not shared with the agent's owner")

// checkSharing refuses a sandbox of agent a made from env unless a's owner may use env.
// The provider refuses such agents at plan and PostgreSQL refuses their rows, but the
// rows may predate a secret added or an owner unshared since, or come from an SQLite
// file written by hand: the harness is where the secret would leave, so it decides
// again, before any sandbox or secret is touched.
func checkSharing(a *agents.Agent, env store.Environment) error {
	if env.UsableBy(a.Owner) {
		return nil
	}
	return fmt.Errorf("agent %q (owner %q) may not run on environment %q: it has secrets, and its owner %q does not share them with %q "+
		"(trueforge_environment.shared_with); no sandbox was created: %w", a.Name, a.Owner, env.Name, env.Owner, a.Owner, ErrEnvironmentNotShared)
}

// checkSharingOf is checkSharing for an existing sandbox, made from environment name,
// read now: an owner may have unshared it, or added a secret, since it was created.
func (m *Manager) checkSharingOf(ctx context.Context, a *agents.Agent, name string) error {
	env, err := m.cfg.Store.GetEnvironment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted since: it has no secrets left to lend
	}
	if err != nil {
		return fmt.Errorf("environment %q of the session's sandbox: %w", name, err)
	}
	if err := checkSharing(a, env); err != nil {
		return fmt.Errorf("%w; the session's sandbox is not used", err)
	}
	return nil
}
