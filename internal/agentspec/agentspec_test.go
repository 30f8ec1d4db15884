package agentspec_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// Specs as the provider stored them before this package existed (its own agentSpec type,
// json.Marshal), byte for byte: every field set, and an agent that sets nothing but its
// name and model. Control planes hold specs like these.
const (
	storedFull = `{"name":"helper","description":"Answers questions about the repo","instructions":"Be brief.",` +
		`"model":{"provider":"openai","name":"gpt-4.1","base_url":"https://llm.internal.example.com/v1","api_key_env":"OPENAI_API_KEY"},` +
		`"mcp_servers":[{"name":"github","url":"https://api.githubcopilot.com/mcp/","credential_env":"GITHUB_MCP_TOKEN","allowed_tools":["get_issue","list_pull_requests"]},` +
		`{"name":"docs","url":"http://docs.internal:8080/mcp","allowed_tools":[]}],` +
		`"skills":[{"name":"pdf","path":"/srv/skills/pdf"}],"code_mode":true,` +
		`"sandbox":{"enabled":true,"environment":"py","file_downloads":false,"idle_stop_minutes":30,"archive_after_minutes":1440,"delete_after_minutes":10080},` +
		`"max_turns":12,"token_budget":200000}`
	storedDefaults = `{"name":"qa","model":{"provider":"scripted","script":"[]"},"mcp_servers":null,"skills":null,"code_mode":false,` +
		`"sandbox":{"enabled":false,"environment":"default","file_downloads":true,"idle_stop_minutes":15,"archive_after_minutes":1440,"delete_after_minutes":10080},` +
		`"max_turns":50,"token_budget":1000000}`
	// Before max_turns and token_budget existed.
	storedBeforeLimits = `{"name":"qa","model":{"provider":"scripted","script":"[]"},"mcp_servers":null,"skills":null,"code_mode":false,` +
		`"sandbox":{"enabled":false,"environment":"default","file_downloads":true,"idle_stop_minutes":15,"archive_after_minutes":1440,"delete_after_minutes":10080}}`
)

func ptr(s string) *string { return &s }

// A spec stored by the provider before this package decodes to the values it was
// written from, and encodes back to the same bytes: the format did not change.
func TestStoredSpecsStillLoad(t *testing.T) {
	full := agentspec.Spec{
		Name: "helper", Description: ptr("Answers questions about the repo"), Instructions: ptr("Be brief."),
		Model: agentspec.Model{Provider: "openai", Name: ptr("gpt-4.1"), BaseURL: ptr("https://llm.internal.example.com/v1"), APIKeyEnv: ptr("OPENAI_API_KEY")},
		MCPServers: []agentspec.MCPServer{
			{Name: "github", URL: "https://api.githubcopilot.com/mcp/", CredentialEnv: ptr("GITHUB_MCP_TOKEN"), AllowedTools: []string{"get_issue", "list_pull_requests"}},
			{Name: "docs", URL: "http://docs.internal:8080/mcp", AllowedTools: []string{}},
		},
		Skills:   []agentspec.Skill{{Name: "pdf", Path: "/srv/skills/pdf"}},
		CodeMode: true,
		Sandbox:  agentspec.Sandbox{Enabled: true, Environment: "py", IdleStopMinutes: 30, ArchiveAfterMinutes: 1440, DeleteAfterMinutes: 10080},
		MaxTurns: 12, TokenBudget: 200000,
	}
	defaults := agentspec.Default("qa")
	defaults.Model = agentspec.Model{Provider: agentspec.ModelScripted, Script: ptr("[]")}
	for _, c := range []struct {
		name, raw string
		want      agentspec.Spec
	}{{"every field", storedFull, full}, {"defaults", storedDefaults, defaults}} {
		got, err := agentspec.Decode([]byte(c.raw))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", c.name, got, c.want)
		}
		if enc := string(got.Encode()); enc != c.raw {
			t.Errorf("%s: encoded\n%s\nwant the stored bytes\n%s", c.name, enc, c.raw)
		}
	}
	// Specs from before the run limits existed run with the defaults they always had.
	old, err := agentspec.Decode([]byte(storedBeforeLimits))
	if err != nil || !reflect.DeepEqual(old, defaults) {
		t.Fatalf("spec without limits: %+v, %v; want %+v", old, err, defaults)
	}
}

// What a spec leaves out, or stores as zero, reads as the default; a field this package
// does not know is ignored; invalid JSON is an error.
func TestDecodeFillsDefaults(t *testing.T) {
	s, err := agentspec.Decode([]byte(`{"name":"a","model":{"provider":"scripted"},"sandbox":{"enabled":true,"idle_stop_minutes":0},"max_turns":0,"from_the_future":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := agentspec.DefaultSandbox()
	want.Enabled = true
	if s.Sandbox != want || s.MaxTurns != agentspec.DefaultMaxTurns || s.TokenBudget != agentspec.DefaultTokenBudget {
		t.Fatalf("decoded %+v; want sandbox %+v and the default limits", s, want)
	}
	if _, err := agentspec.Decode([]byte(`{"name":`)); err == nil {
		t.Fatal("invalid JSON decoded")
	}
}

// The defaults are the documented ones.
func TestDefaults(t *testing.T) {
	want := agentspec.Sandbox{Enabled: false, Environment: "default", FileDownloads: true, IdleStopMinutes: 15, ArchiveAfterMinutes: 1440, DeleteAfterMinutes: 10080}
	if got := agentspec.DefaultSandbox(); got != want {
		t.Fatalf("DefaultSandbox() = %+v; want %+v", got, want)
	}
	if d := agentspec.Default("a"); d.MaxTurns != 50 || d.TokenBudget != 1_000_000 || d.Sandbox != want || d.Name != "a" {
		t.Fatalf("Default(a) = %+v", d)
	}
}

func TestSpecJSONKeepsNullApartFromEmpty(t *testing.T) {
	empty := ""
	s := agentspec.Spec{Name: "a", Description: &empty, MCPServers: []agentspec.MCPServer{}, Model: agentspec.Model{Provider: "scripted"}}
	raw := string(s.Encode())
	for _, want := range []string{`"description":""`, `"mcp_servers":[]`, `"skills":null`, `"sandbox":{"enabled":false`} {
		if !strings.Contains(raw, want) {
			t.Errorf("spec %s lacks %s", raw, want)
		}
	}
	if strings.Contains(raw, `"instructions"`) {
		t.Errorf("spec %s has instructions, which were null", raw)
	}
	back, err := agentspec.Decode([]byte(raw))
	if err != nil || back.Description == nil || *back.Description != "" || back.Instructions != nil || back.MCPServers == nil || back.Skills != nil {
		t.Fatalf("decoded %+v, %v; want description \"\", no instructions, mcp_servers [] and skills null", back, err)
	}
}

// Only an enabled sandbox references its environment.
func TestEnvironmentRef(t *testing.T) {
	s := agentspec.Default("a")
	s.Sandbox.Environment = "py"
	if ref := s.EnvironmentRef(); ref != "" {
		t.Fatalf("sandbox off: reference %q; want none", ref)
	}
	s.Sandbox.Enabled = true
	if ref := s.EnvironmentRef(); ref != "py" {
		t.Fatalf("sandbox on: reference %q; want py", ref)
	}
}

func TestCodeLimitsDefaultWhatIsLeftOut(t *testing.T) {
	s, err := agentspec.Decode([]byte(`{"name":"a","code_mode_limits":{"max_calls":7,"run_timeout_seconds":-1}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := s.CodeLimits()
	want := agentspec.DefaultCodeModeLimits()
	want.MaxCalls = 7
	if got != want {
		t.Fatalf("CodeLimits = %+v, want %+v", got, want)
	}
	if got := agentspec.Default("b").CodeLimits(); got != agentspec.DefaultCodeModeLimits() {
		t.Fatalf("an agent without code_mode_limits: %+v, want the defaults", got)
	}
}

// sandbox.extract_limits reads as the defaults where it is left out, one by one.
func TestExtractLimitsDefaultWhatIsLeftOut(t *testing.T) {
	s, err := agentspec.Decode([]byte(`{"name":"a","sandbox":{"enabled":true,"extract_limits":{"max_entries":50,"max_ratio":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := agentspec.DefaultExtractLimits()
	want.MaxEntries = 50
	if got := s.Sandbox.Extract(); got != want {
		t.Fatalf("Extract = %+v, want %+v", got, want)
	}
	if got := agentspec.Default("b").Sandbox.Extract(); got != agentspec.DefaultExtractLimits() {
		t.Fatalf("an agent without extract_limits: %+v, want the defaults", got)
	}
}

// A published skill carries its description and digest; specs stored before skills were
// published have neither, and encode as they were stored (TestStoredSpecsStillLoad).
func TestSkillDigestRoundTrips(t *testing.T) {
	s := agentspec.Default("a")
	s.Skills = []agentspec.Skill{{Name: "pdf", Path: "./skills/pdf", Description: "Reads PDFs.", Digest: "sha256:" + strings.Repeat("0", 64)}}
	raw := string(s.Encode())
	if !strings.Contains(raw, `"skills":[{"name":"pdf","path":"./skills/pdf","description":"Reads PDFs.","digest":"sha256:000`) {
		t.Fatalf("encoded %s", raw)
	}
	back, err := agentspec.Decode([]byte(raw))
	if err != nil || !reflect.DeepEqual(back.Skills, s.Skills) {
		t.Fatalf("decoded %+v, %v", back.Skills, err)
	}
}
