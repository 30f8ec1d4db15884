package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
)

func writeCredentials(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const teamsFile = `{"credentials": [
  {"name": "b-facts", "env": "B_FACTS_TOKEN", "origins": ["https://facts.b.example"], "owners": ["team_b"]},
  {"name": "openai", "env": "OPENAI_API_KEY", "origins": ["https://api.openai.com"], "owners": ["team_*"]},
  {"name": "local", "env": "LOCAL_TOKEN", "origins": ["http://127.0.0.1:8080", "https://Local.Example:443"], "owners": ["*"]}
]}`

// With a credentials file, a credential goes only to an origin it is bound to and only
// for an agent of an owner it allows, whatever the agent names; the older *_env form
// is read as "some credential holding this variable", under the same bindings.
func TestCredentialsFileBindsOriginsAndOwners(t *testing.T) {
	file, err := agents.LoadCredentials(writeCredentials(t, teamsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		owner, name, env, url string
		want                  string // "" means granted
		grant                 string // the variable granted
	}{
		{"team_b", "b-facts", "", "https://facts.b.example/mcp", "", "B_FACTS_TOKEN"},
		{"team_b", "b-facts", "", "https://FACTS.b.example:443/other", "", "B_FACTS_TOKEN"},
		{"team_a", "b-facts", "", "https://facts.b.example/mcp", `credential "b-facts" may be used only by agents of team_b`, ""},
		{"team_a", "b-facts", "", "http://127.0.0.1:9999/mcp", `may be used only by agents of team_b`, ""},
		{"team_b", "b-facts", "", "http://127.0.0.1:9999/mcp", `credential "b-facts" is bound to https://facts.b.example:443`, ""},
		{"team_b", "b-facts", "", "https://facts.b.example:8443/mcp", "is bound to", ""},
		{"team_a", "openai", "", "https://api.openai.com/v1", "", "OPENAI_API_KEY"},
		{"team_a", "openai", "", "https://attacker.example/v1", `not to https://attacker.example:443, the origin of x.url`, ""},
		{"ops", "openai", "", "https://api.openai.com/v1", `agent "x" is owned by "ops"`, ""},
		{"anyone", "local", "", "http://127.0.0.1:8080/mcp", "", "LOCAL_TOKEN"},
		{"anyone", "local", "", "https://local.example/mcp", "", "LOCAL_TOKEN"},
		{"anyone", "missing", "", "https://local.example/mcp", `declares no credential "missing"`, ""},
		{"team_b", "", "B_FACTS_TOKEN", "https://facts.b.example/mcp", "", "B_FACTS_TOKEN"},
		{"team_a", "", "B_FACTS_TOKEN", "https://facts.b.example/mcp", `declares no credential holding B_FACTS_TOKEN that agents of "team_a" may send`, ""},
		{"team_b", "", "B_FACTS_TOKEN", "http://127.0.0.1:8080/mcp", "declares no credential holding B_FACTS_TOKEN", ""},
		{"team_b", "", "PGPASSWORD", "https://facts.b.example/mcp", "declares no credential holding PGPASSWORD", ""},
		{"team_b", "", "TRUEFORGE_SECRET_KEY", "https://facts.b.example/mcp", "variables named TRUEFORGE_*", ""},
		{"team_b", "TRUEFORGE_SECRET_KEY", "", "https://facts.b.example/mcp", "names starting with TRUEFORGE_", ""},
	} {
		au := agents.Authority{File: file, Agent: "x", Owner: c.owner}
		field := "x.credential"
		if c.name == "" {
			field = "x.credential_env"
		}
		g, err := au.Authorize(agents.CredentialUse{Field: field, Name: c.name, Env: c.env, URLField: "x.url", URL: c.url})
		switch {
		case c.want == "" && (err != nil || g.Env != c.grant):
			t.Errorf("%s naming %s%s for %s: %v, %+v; want %s granted", c.owner, c.name, c.env, c.url, err, g, c.grant)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was sent") && !strings.Contains(err.Error(), "TRUEFORGE_")):
			t.Errorf("%s naming %s%s for %s: %v; want %q", c.owner, c.name, c.env, c.url, err, c.want)
		}
	}
}

// Without a credentials file: on SQLite the operator's own agents may name variables
// (the single-user default); another owner's agents, and every agent on PostgreSQL,
// are sent nothing.
func TestNoCredentialsFile(t *testing.T) {
	use := agents.CredentialUse{Field: "model.api_key_credential", Name: "OPENAI_API_KEY", URLField: "model.base_url", URL: "https://api.openai.com/v1"}
	if g, err := (agents.Authority{Agent: "x", Owner: "me", Operator: "me"}).Authorize(use); err != nil || g.Env != "OPENAI_API_KEY" {
		t.Errorf("the operator's own agent: %v %+v", err, g)
	}
	if _, err := (agents.Authority{Agent: "x", Owner: "mallory", Operator: "me"}).Authorize(use); err == nil || !strings.Contains(err.Error(), `agent "x" is owned by "mallory", not by this harness's operator "me"`) {
		t.Errorf("another owner's agent: %v", err)
	}
	if _, err := (agents.Authority{Agent: "x", Owner: "team_a"}).Authorize(use); err == nil || !strings.Contains(err.Error(), "on a shared (PostgreSQL) control plane it sends no credential without one") {
		t.Errorf("PostgreSQL without a file: %v", err)
	}
	use.Name = "facts.token"
	if _, err := (agents.Authority{Agent: "x", Owner: "me", Operator: "me"}).Authorize(use); err == nil || !strings.Contains(err.Error(), "read as the harness variable of the same name") {
		t.Errorf("a credential name that is no variable, without a file: %v", err)
	}
}

// Every mistake in the file names the file, the credential and the field.
func TestCredentialsFileErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{``, `the file must be one JSON object`},
		{`{"creds": []}`, `"creds" is not a field of a credentials file`},
		{`{"credentials": {}}`, `"credentials" must be a list`},
		{`{"credentials": [{"env": "X"}]}`, `credentials[0].name is missing`},
		{`{"credentials": [{"name": "bad name"}]}`, `credentials[0].name "bad name": not a credential name`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["https://a.example"], "owners": ["*"], "origin": []}]}`, `credentials[0] ("a"): "origin" is not a field of a credential`},
		{`{"credentials": [{"name": "a", "origins": ["https://a.example"], "owners": ["*"]}]}`, `credentials[0] ("a").env is missing`},
		{`{"credentials": [{"name": "a", "env": "TRUEFORGE_SECRET_KEY", "origins": ["https://a.example"], "owners": ["*"]}]}`, `credentials[0] ("a").env "TRUEFORGE_SECRET_KEY": variables named TRUEFORGE_*`},
		{`{"credentials": [{"name": "a", "env": "X", "owners": ["*"]}]}`, `credentials[0] ("a").origins is missing or empty`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["http://a.example"], "owners": ["*"]}]}`, `credentials[0] ("a").origins[0] "http://a.example": plain http:// would send the credential in clear text`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["https://a.example/mcp"], "owners": ["*"]}]}`, `an origin has no path`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["a.example"], "owners": ["*"]}]}`, `an origin is https://`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["https://a.example"]}]}`, `credentials[0] ("a").owners is missing or empty`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["https://a.example"], "owners": ["[x"]}]}`, `credentials[0] ("a").owners[0] "[x"`},
		{`{"credentials": [{"name": "a", "env": "X", "origins": ["https://a.example"], "owners": ["*"]}, {"name": "a", "env": "Y", "origins": ["https://a.example"], "owners": ["*"]}]}`, `credentials[1].name "a": another credential has this name`},
	} {
		path := writeCredentials(t, c.text)
		_, err := agents.LoadCredentials(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want %q and the file's path", c.text, err, c.want)
		}
	}
	t.Setenv(agents.CredentialEnvsVar, "X")
	file, err := agents.LoadCredentials(writeCredentials(t, `{"credentials": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := agents.CheckCredentialEnvsVar(file); err == nil || !strings.Contains(err.Error(), "unset TRUEFORGE_CREDENTIAL_ENVS") {
		t.Errorf("TRUEFORGE_CREDENTIAL_ENVS beside a file: %v", err)
	}
}
