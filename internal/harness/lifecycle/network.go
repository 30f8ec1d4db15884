package lifecycle

import (
	"context"
	"fmt"
	"maps"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// network fills a new sandbox's network settings from its environment, read now: the
// sandbox keeps this policy until it is replaced (secrets are read live by the proxy).
//
//   - daytona: Daytona enforces the policy itself: BlockNetwork (networkBlockAll),
//     AllowDomains (domainAllowList) and, unless block_all, each of the environment's
//     secrets as the Daytona secret the provider created for it (daytona.SecretName).
//   - local: block_all is BlockNetwork; anything else goes through a per-sandbox egress
//     proxy (Config.Network), never the host's network; without a Network the sandbox
//     gets no network at all.
//
// It returns a summary for the sandbox_provisioned event.
func (m *Manager) network(ctx context.Context, sessionID string, a *agents.Agent, req *sandbox.CreateRequest) (map[string]any, error) {
	env := a.Environment
	summary := map[string]any{"block_all": env.BlockAll, "allow_domains": env.AllowDomains}
	switch a.Provider.Type {
	case "daytona":
		if env.BlockAll {
			summary["mode"] = "blocked"
			return summary, nil
		}
		req.AllowDomains = env.AllowDomains
		secrets, err := m.cfg.Store.ListSecrets(ctx, env.Name)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range secrets {
			if req.Secrets == nil {
				req.Secrets = map[string]string{}
			}
			req.Secrets[s.EnvName] = daytona.SecretName(env.Name, s.EnvName)
			names = append(names, s.EnvName)
		}
		summary["mode"], summary["secrets"] = "daytona", names
	case "local":
		if env.BlockAll {
			summary["mode"] = "blocked"
			return summary, nil
		}
		if m.cfg.Network == nil {
			req.BlockNetwork = true
			summary["mode"] = "blocked (no egress proxy in this harness)"
			return summary, nil
		}
		vars, eg, err := m.cfg.Network.Attach(ctx, sessionID, req.ID, env)
		if err != nil {
			return nil, err
		}
		merged := maps.Clone(req.Env)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, vars)
		req.Env, req.Egress = merged, eg
		summary["mode"] = "egress proxy"
	default:
		return nil, fmt.Errorf("sandbox provider %q has type %q, whose network policy this harness cannot apply", a.Provider.Name, a.Provider.Type)
	}
	return summary, nil
}

// ensureNetwork makes the egress proxy of an existing local sandbox serve in this
// process before the sandbox is used or started. A proxy recreated here (the harness
// restarted: every `run` is a new process) listens at the same path, in the socket
// directory the runtime bound into the sandbox, so a Running sandbox reaches it as it
// is: nothing is restarted, processes left running by earlier turns keep running.
func (m *Manager) ensureNetwork(ctx context.Context, l *Lease) error {
	rec := l.Record
	if rec.ProviderType != "local" || m.cfg.Network == nil {
		return nil
	}
	_, err := m.cfg.Network.Ensure(ctx, rec.SessionID, rec.SandboxID)
	return err
}
