package agentspec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// HarnessEnvPrefix starts the names of the harness's own settings and keys
// (TRUEFORGE_SECRET_KEY decrypts every stored secret, TRUEFORGE_DATABASE_URL reaches the
// control plane). A spec is written by the agent's author, not by whoever runs the
// agent, so no spec may name one of these as a credential: the provider refuses it at
// plan and the harness before anything is sent (CheckCredentialEnv, CheckCredentialName).
const HarnessEnvPrefix = "TRUEFORGE_"

var (
	envVarRe         = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	credentialNameRe = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)
)

// isHarnessVar reports whether name is one of the harness's own variables. The prefix
// is compared ignoring case: on Windows variable names are case-insensitive, so
// trueforge_secret_key would read the same key.
func isHarnessVar(name string) bool {
	return len(name) >= len(HarnessEnvPrefix) && strings.EqualFold(name[:len(HarnessEnvPrefix)], HarnessEnvPrefix)
}

// CheckCredentialEnv is the rule for a variable named as a credential (a spec's
// mcp_servers[].credential_env and model.api_key_env, a credentials file's env): a
// variable name that is not one of the harness's own (HarnessEnvPrefix). The error
// says what is wrong and what to do; callers prefix the field and the value.
func CheckCredentialEnv(name string) error {
	return checkName(name, envVarRe(),
		"not an environment variable name; use letters, digits and '_', not starting with a digit (for example GITHUB_TOKEN)",
		"variables named %s* are the harness's own settings and are never sent to a model or MCP server; export the credential under another name")
}

// CheckCredentialName is the rule for a credential's name (a spec's
// mcp_servers[].credential and model.api_key_credential, a credentials file's name):
// letters, digits, '_', '.' and '-', starting with a letter or '_', at most 128
// characters, and not starting with HarnessEnvPrefix. The last because, with no
// credentials file, a harness on SQLite reads a credential name as the variable of the
// same name (see the running-agents guide).
func CheckCredentialName(name string) error {
	return checkName(name, credentialNameRe(),
		"not a credential name; use letters, digits, '_', '.' and '-', starting with a letter or '_', at most 128 characters (for example github)",
		"names starting with %s are the harness's own settings, never a credential")
}

// checkName is the shape of both rules: name must match re (else the error malformed
// says), and must not be one of the harness's own variables (else the error own says,
// a format of HarnessEnvPrefix).
func checkName(name string, re *regexp.Regexp, malformed, own string) error {
	if !re.MatchString(name) {
		return errors.New(malformed)
	}
	if isHarnessVar(name) {
		return fmt.Errorf(own, HarnessEnvPrefix)
	}
	return nil
}

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
