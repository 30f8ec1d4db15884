package daytonatest

import "maps"

// A sandbox's secret variables hold the placeholders fixed when it started, not the
// secrets' current ones (v0.205 docs /docs/en/secrets and SDK reference pages; v0.190 has no
// secrets; /work/shared/reference/daytona-api.md §7 "Attaching to a sandbox" and "Server
// behaviours the OpenAPI document does not show"):
//
//   - A started sandbox keeps the placeholder it started with when its secret is deleted,
//     or deleted and created again (which gives the secret a new placeholder); only a
//     start (from stopped or archived) picks up the current one. A rotated value keeps the
//     placeholder, so nothing changes in the sandbox.
//   - PUT /sandbox/{id}/secrets reaches processes started after it, but only in a sandbox
//     that started with secrets: one started with none must be restarted first.
//
// The egress proxy's substitution of values is not emulated.

// fixSecretEnv resolves sb's secrets to their placeholders now, as a start does. Called
// with mu held.
func (s *Server) fixSecretEnv(sb *sbox) {
	sb.secretEnv = s.secretPlaceholders(sb.Secrets)
	sb.startedWithSecrets = len(sb.Secrets) > 0
}

// secretsAttached is a PUT /sandbox/{id}/secrets on sb: its new set reaches the processes
// started from now on if it started with secrets. Called with mu held.
func (s *Server) secretsAttached(sb *sbox) {
	if sb.State == "started" && sb.startedWithSecrets {
		sb.secretEnv = s.secretPlaceholders(sb.Secrets)
	}
}

// secretPlaceholders maps each variable of secrets to its secret's placeholder (a secret
// that no longer exists gives none). Called with mu held.
func (s *Server) secretPlaceholders(secrets []map[string]string) map[string]string {
	env := map[string]string{}
	for _, m := range secrets {
		for k, name := range m {
			if sec := s.secretByName(name); sec != nil {
				env[k] = sec.Placeholder
			}
		}
	}
	return env
}

// processEnv is the environment of a process started in sb now: its env with its fixed
// secret placeholders. Called with mu held.
func (sb *sbox) processEnv() map[string]string {
	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, sb.secretEnv)
	return env
}
