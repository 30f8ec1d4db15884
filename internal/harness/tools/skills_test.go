package tools

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
)

// load_skill is offered to an agent with a sandbox and skills, and lists them (name and
// description, one line each) in its description: the spec is all it reads.
func TestLoadSkillOfferedWithItsList(t *testing.T) {
	agent := func(sandbox bool, skills ...agentspec.Skill) *agents.Agent {
		a := &agents.Agent{Name: "a"}
		a.Spec.Sandbox.Enabled = sandbox
		a.Spec.Skills = skills
		return a
	}
	pdf := agentspec.Skill{Name: "pdf", Description: "Extract text\n  and tables.", Digest: "sha256:1"}
	csv := agentspec.Skill{Name: "csv", Description: "Clean CSV files.", Digest: "sha256:2"}
	find := func(a *agents.Agent) string {
		for _, s := range Specs(a) {
			if s.Name == NameLoadSkill {
				return s.Description
			}
		}
		return ""
	}
	if d := find(agent(false, pdf)); d != "" {
		t.Fatalf("offered without a sandbox: %q", d)
	}
	if d := find(agent(true)); d != "" {
		t.Fatalf("offered without skills: %q", d)
	}
	d := find(agent(true, pdf, csv))
	for _, want := range []string{"\n- pdf: Extract text and tables.", "\n- csv: Clean CSV files.", ".skills/<name>/"} {
		if !strings.Contains(d, want) {
			t.Fatalf("description lacks %q:\n%s", want, d)
		}
	}
}
