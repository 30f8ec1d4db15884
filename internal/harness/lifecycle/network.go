package lifecycle

import (
	"context"
	"maps"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// network fills a new sandbox's network settings from its environment, read now: the
// sandbox keeps this policy until it is replaced (secrets are read live by the proxy).
// How depends on what the provider's backend declares (sandbox.Capabilities):
//
//   - NetworkByBackend (Daytona): the backend enforces the policy itself: BlockNetwork,
//     AllowDomains and, unless block_all, each of the environment's secrets by the name
//     the backend's secret store gives it (the provider created it there).
//   - otherwise (local): block_all is BlockNetwork; anything else goes through a
//     per-sandbox egress proxy (Config.Network), never the host's network; without a
//     Network the sandbox gets no network at all.
//
// A proxied sandbox's proxy depends on what the request is for: a session's sandbox gets
// its proxy started (Attach); a warm pool member (no session, an id) gets it prepared,
// and its sealed state is returned for the member's row (Prepare); a request only to be
// digested (no id) gets none (its policy is in poolConfig).
//
// It returns a summary for the sandbox_provisioned event.
func (m *Manager) network(ctx context.Context, sessionID string, a *agents.Agent, req *sandbox.CreateRequest) (map[string]any, string, error) {
	env := a.Environment
	summary := map[string]any{"block_all": env.BlockAll, "allow_domains": env.AllowDomains}
	if env.BlockAll {
		req.BlockNetwork = true
		summary["mode"] = "blocked"
		return summary, "", nil
	}
	allow, err := sandboxAllow(env, summary)
	if err != nil {
		return nil, "", err
	}
	info, err := m.cfg.Runtimes.Info(a.Provider.Type)
	if err != nil {
		return nil, "", err
	}
	if info.Capabilities.NetworkByBackend {
		req.AllowDomains = allow
		secrets, err := m.cfg.Store.ListSecrets(ctx, env.Name)
		if err != nil {
			return nil, "", err
		}
		var names []string
		if len(secrets) > 0 {
			ss, err := m.cfg.Runtimes.Secrets(ctx, a.Provider)
			if err != nil {
				return nil, "", err
			}
			req.Secrets = map[string]string{}
			for _, s := range secrets {
				req.Secrets[s.EnvName] = ss.Name(env.Name, s.EnvName)
				names = append(names, s.EnvName)
			}
		}
		summary["mode"], summary["secrets"] = info.Type, names
		return summary, "", nil
	}
	if m.cfg.Network == nil {
		req.BlockNetwork = true
		summary["mode"] = "blocked (no egress proxy in this harness)"
		return summary, "", nil
	}
	summary["mode"] = "egress proxy"
	var vars map[string]string
	var eg *sandbox.Egress
	prepared := ""
	switch {
	case req.ID == "":
		return summary, "", nil
	case sessionID == "":
		vars, eg, prepared, err = m.cfg.Network.Prepare(ctx, req.ID, env)
	default:
		vars, eg, err = m.cfg.Network.Attach(ctx, sessionID, req.ID, env)
	}
	if err != nil {
		return nil, "", err
	}
	merged := maps.Clone(req.Env)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, vars)
	req.Env, req.Egress = merged, eg
	return summary, prepared, nil
}

// proxied reports whether sandboxes of a provider type reach the network through this
// harness's egress proxy (their backend does not enforce the policy itself).
func (m *Manager) proxied(providerType string) bool {
	info, err := m.cfg.Runtimes.Info(providerType)
	return err == nil && !info.Capabilities.NetworkByBackend && m.cfg.Network != nil
}

// ensureNetwork makes the egress proxy of an existing proxied sandbox serve in this
// process before the sandbox is used or started. A proxy recreated here (the harness
// restarted: every `run` is a new process) listens at the same path, in the socket
// directory the runtime bound into the sandbox, so a Running sandbox reaches it as it
// is: nothing is restarted, processes left running by earlier turns keep running.
func (m *Manager) ensureNetwork(ctx context.Context, l *Lease) error {
	rec := l.Record
	if !m.proxied(rec.ProviderType) {
		return nil
	}
	_, err := m.cfg.Network.Ensure(ctx, rec.SessionID, rec.SandboxID)
	return err
}
