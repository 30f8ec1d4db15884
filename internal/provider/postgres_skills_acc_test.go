package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Skills on PostgreSQL: alice's apply publishes the skill's content, which the harness
// role reads; a changed file plans an in-place update for her, and the old content is
// collected. Bob plans her unchanged configuration clean, but a changed file in it is a
// change of her agent, refused at plan with both roles named. Destroying the agent
// leaves no content behind.
func TestAccPostgres_skills(t *testing.T) {
	f := newPGFixture(t)
	pdf := skillDir(t, "pdf", map[string]string{"scripts/run.sh*": "#!/bin/sh\necho v1\n"})
	cfg := skillAgentHCL(fmt.Sprintf(`[{ path = %q }]`, pdf))
	v1 := skillDigest(t, pdf)
	var v2 string
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(cfg),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills").AtSliceIndex(0).AtMapKey("digest"), knownvalue.StringExact(v1)),
				},
				Check: func(*terraformState) error {
					if err := expectBlobs(t, f.store(), v1); err != nil {
						return err
					}
					return harnessLoadsSkill(t, f.storeAs(f.harness), "pdf", v1, "scripts/run.sh", "#!/bin/sh\necho v1\n")
				},
			},
			{
				// Bob plans alice's unchanged configuration: empty, no error.
				Config:   f.configAs(f.bob, cfg),
				PlanOnly: true,
			},
			{
				PreConfig: func() { writeSkillFile(t, pdf, "scripts/run.sh*", "#!/bin/sh\necho v2\n") },
				Config:    f.configAs(f.bob, cfg),
				ExpectError: cliError(fmt.Sprintf(`Agent Owned By Another User.*"skilled" is owned by %q.*cannot be changed.*by %q`,
					f.alice, f.bob)),
			},
			{
				PreConfig:        func() { v2 = skillDigest(t, pdf) },
				Config:           f.config(cfg),
				ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionUpdate),
				Check: func(*terraformState) error {
					if err := expectBlobs(t, f.store(), v2); err != nil {
						return err
					}
					return harnessLoadsSkill(t, f.storeAs(f.harness), "pdf", v2, "scripts/run.sh", "#!/bin/sh\necho v2\n")
				},
			},
		},
		CheckDestroy: func(*terraformState) error { return expectBlobs(t, f.store()) },
	})
}
