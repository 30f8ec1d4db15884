package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// skillDir writes a skill folder for a test: a SKILL.md naming the skill name (described
// as "Does <name> things."), and files (path -> content; a path ending in "*" is made
// executable). The path is absolute: the provider runs in the test process, whose working
// directory is not Terraform's.
func skillDir(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	all := map[string]string{"SKILL.md": fmt.Sprintf("---\nname: %s\ndescription: Does %s things.\n---\n\n# %s\n\nRun scripts/run.sh.\n", name, name, name)}
	for p, c := range files {
		all[p] = c
	}
	for p, c := range all {
		writeSkillFile(t, dir, p, c)
	}
	return dir
}

func writeSkillFile(t *testing.T, dir, p, content string) {
	t.Helper()
	mode := os.FileMode(0o644)
	if strings.HasSuffix(p, "*") {
		p, mode = strings.TrimSuffix(p, "*"), 0o755
	}
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// skillDigest is the digest apply publishes for dir.
func skillDigest(t *testing.T, dir string) string {
	t.Helper()
	b, err := skills.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b.Digest
}

// skillAgentHCL is agent "a" on the default environment with the given skills body.
func skillAgentHCL(skillsHCL string) string {
	return agentHCL("skilled", `  sandbox = { enabled = true, environment = trueforge_sandbox_provider.local.default_environment }
  skills  = `+skillsHCL)
}

// blobDigests lists the skill content stored in the control plane.
func blobDigests(t *testing.T, st *store.Store) []string {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), `SELECT digest FROM skill_blobs ORDER BY digest`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// expectBlobs checks that exactly the content of digests is stored.
func expectBlobs(t *testing.T, st *store.Store, digests ...string) error {
	got := blobDigests(t, st)
	want := slices.Sorted(slices.Values(digests))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("stored skill content %v; want %v", got, want)
	}
	return nil
}

// harnessLoadsSkill checks that the harness runs agent "skilled" with skill name at
// digest, and that the control plane serves its content, decoding to the folder's files.
func harnessLoadsSkill(t *testing.T, st *store.Store, name, digest, file, content string) error {
	a, err := agents.Load(t.Context(), st, "skilled")
	if err != nil {
		return err
	}
	for _, s := range a.Spec.Skills {
		if s.Name != name {
			continue
		}
		if s.Digest != digest || s.Description != "Does "+name+" things." {
			return fmt.Errorf("the harness runs skill %+v; want digest %s", s, digest)
		}
		raw, err := st.GetSkillBlob(t.Context(), digest)
		if err != nil {
			return err
		}
		b, err := skills.Decode(raw, digest)
		if err != nil {
			return err
		}
		for _, f := range b.Files {
			if f.Path == file && string(f.Content) == content {
				return nil
			}
		}
		return fmt.Errorf("skill %s as stored has no %s with %q", name, file, content)
	}
	return fmt.Errorf("the harness runs agent skilled with skills %+v; want %s", a.Spec.Skills, name)
}

// A skill folder is published by apply: digest and description in state (the name taken
// from SKILL.md when left out), its content in the control plane for the harness. A file
// changed on disk, the configuration unchanged, plans an in-place update of the agent
// showing the new digest; after the apply the plan is empty, and the old content is
// collected. Removing the skills and destroying the agent leave no content behind.
func TestAccAgent_skills(t *testing.T) {
	f := newFixture(t)
	pdf := skillDir(t, "pdf", map[string]string{"scripts/run.sh*": "#!/bin/sh\necho v1\n", "reference.md": "forms"})
	csv := skillDir(t, "csv", nil)
	cfg := f.config(skillAgentHCL(fmt.Sprintf(`[{ path = %q }, { name = "csv", path = %q }]`, pdf, csv)))
	v1, csvDigest := skillDigest(t, pdf), skillDigest(t, csv)
	var v2 string
	skillState := func(name, dir, digest string) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"name": knownvalue.StringExact(name), "path": knownvalue.StringExact(dir),
			"digest": knownvalue.StringExact(digest), "description": knownvalue.StringExact("Does " + name + " things."),
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills"), knownvalue.ListExact([]knownvalue.Check{
						skillState("pdf", pdf, v1), skillState("csv", csv, csvDigest),
					})),
				},
				Check: func(*terraformState) error {
					if err := expectBlobs(t, f.store(), v1, csvDigest); err != nil {
						return err
					}
					return harnessLoadsSkill(t, f.store(), "pdf", v1, "scripts/run.sh", "#!/bin/sh\necho v1\n")
				},
			},
			{
				ResourceName:      agentAddr,
				ImportState:       true,
				ImportStateId:     "skilled",
				ImportStateVerify: true,
			},
			{
				// A file changed on disk, the configuration as it was.
				PreConfig: func() {
					writeSkillFile(t, pdf, "scripts/run.sh*", "#!/bin/sh\necho v2\n")
					v2 = skillDigest(t, pdf)
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(agentAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills").AtSliceIndex(0).AtMapKey("digest"), knownvalueFunc(func() string { return v2 })),
					plancheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills").AtSliceIndex(1).AtMapKey("digest"), knownvalue.StringExact(csvDigest)),
				}},
				Check: func(*terraformState) error {
					if err := expectBlobs(t, f.store(), v2, csvDigest); err != nil {
						return err
					}
					return harnessLoadsSkill(t, f.store(), "pdf", v2, "scripts/run.sh", "#!/bin/sh\necho v2\n")
				},
			},
			{
				// Nothing changed since: an empty plan.
				Config:   cfg,
				PlanOnly: true,
			},
			{
				// A change that is only planned is a non-empty plan.
				PreConfig:          func() { writeSkillFile(t, pdf, "reference.md", "forms, revised") },
				Config:             cfg,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// The executable bit is part of the digest too.
				PreConfig: func() {
					writeSkillFile(t, pdf, "reference.md", "forms")
					if err := os.Chmod(filepath.Join(pdf, "scripts/run.sh"), 0o644); err != nil {
						t.Fatal(err)
					}
				},
				Config:             cfg,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// Skills removed: their content is collected.
				PreConfig: func() {
					if err := os.Chmod(filepath.Join(pdf, "scripts/run.sh"), 0o755); err != nil {
						t.Fatal(err)
					}
				},
				Config: f.config(skillAgentHCL(`[]`)),
				Check:  func(*terraformState) error { return expectBlobs(t, f.store()) },
			},
			{
				Config: cfg,
				Check:  func(*terraformState) error { return expectBlobs(t, f.store(), v2, csvDigest) },
			},
		},
		CheckDestroy: func(*terraformState) error { return expectBlobs(t, f.store()) },
	})
}

// knownvalueFunc checks a string against want(), read when the check runs (after a
// PreConfig that computes it).
func knownvalueFunc(want func() string) knownvalue.Check { return lateString{want} }

type lateString struct{ want func() string }

func (l lateString) CheckValue(v any) error { return knownvalue.StringExact(l.want()).CheckValue(v) }
func (l lateString) String() string         { return l.want() }

// Bad skill folders are refused at plan, naming the file and the fix; nothing is stored.
func TestAccAgent_badSkillFolders(t *testing.T) {
	f := newFixture(t)
	dir := func(files map[string]string) string {
		d := filepath.Join(t.TempDir(), "s")
		for p, c := range files {
			writeSkillFile(t, d, p, c)
		}
		return d
	}
	good := func(extra map[string]string) string { return skillDir(t, "pdf", extra) }
	withSymlink := good(nil)
	if err := os.Symlink("/etc/passwd", filepath.Join(withSymlink, "passwd")); err != nil {
		t.Fatal(err)
	}
	withFifo := good(nil)
	if err := syscall.Mkfifo(filepath.Join(withFifo, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	many := map[string]string{}
	for i := range skills.MaxFiles {
		many[fmt.Sprintf("data/%03d.txt", i)] = "x"
	}
	cases := []struct {
		name, skillsHCL, want string
	}{
		{"missing folder", fmt.Sprintf(`[{ path = %q }]`, filepath.Join(t.TempDir(), "nope")), `Skill Folder Not Found.*skills\[0\].path.*does not exist.*\$\{path.module\}/skills/<name>`},
		{"no SKILL.md", fmt.Sprintf(`[{ path = %q }]`, dir(map[string]string{"run.sh": "x"})), `Missing SKILL.md.*has no SKILL.md at its top.*name: <name>`},
		{"no name", fmt.Sprintf(`[{ path = %q }]`, dir(map[string]string{"SKILL.md": "---\ndescription: d\n---\n"})), `Invalid SKILL.md.*SKILL.md has no name in its front matter.*Add a line name:`},
		{"no description", fmt.Sprintf(`[{ path = %q }]`, dir(map[string]string{"SKILL.md": "---\nname: pdf\n---\n"})), `Invalid SKILL.md.*SKILL.md has no description.*Add a line description:`},
		{"no front matter", fmt.Sprintf(`[{ path = %q }]`, dir(map[string]string{"SKILL.md": "# PDF\n"})), `Invalid SKILL.md.*does not start with front matter`},
		{"symlink", fmt.Sprintf(`[{ path = %q }]`, withSymlink), `Symlink In Skill Folder.*passwd in skill folder .* is a symlink \(to "/etc/passwd"\).*Replace the symlink with a copy`},
		{"special file", fmt.Sprintf(`[{ path = %q }]`, withFifo), `Special File In Skill Folder.*pipe in skill folder .* is not a regular file`},
		{"too large", fmt.Sprintf(`[{ path = %q }]`, good(map[string]string{"data.bin": strings.Repeat("x", skills.MaxBytes)})), `Skill Folder Too Large.*data.bin.*the limit is 1048576 bytes per skill`},
		{"SKILL.md too large", fmt.Sprintf(`[{ path = %q }]`, dir(map[string]string{"SKILL.md": "---\nname: pdf\ndescription: d\n---\n" + strings.Repeat("x", skills.MaxSkillMDBytes)})), `Skill Folder Too Large.*SKILL.md is .* bytes; the limit is 65536 bytes`},
		{"too many files", fmt.Sprintf(`[{ path = %q }]`, good(many)), `Skill Folder Too Large.*more than 512 files \(at data/511.txt\)`},
		{"too deep", fmt.Sprintf(`[{ path = %q }]`, good(map[string]string{"a/b/c/d/e/f/g/h/i.txt": ""})), `Invalid File Name In Skill Folder.*a/b/c/d/e/f/g/h/i.txt is 9 levels deep; the limit is 8`},
		{"control character", fmt.Sprintf(`[{ path = %q }]`, good(map[string]string{"bad\x1bname.txt": ""})), `Invalid File Name In Skill Folder.*"bad\\x1bname.txt" contains a control character`},
		{"backslash", fmt.Sprintf(`[{ path = %q }]`, good(map[string]string{`a\b.txt`: ""})), `Invalid File Name In Skill Folder.*"a\\\\b.txt" contains a backslash`},
		{"not UTF-8", fmt.Sprintf(`[{ path = %q }]`, good(map[string]string{"caf\xe9.txt": ""})), `Invalid File Name In Skill Folder.*the file name "caf\\xe9.txt" is not valid UTF-8`},
		{"name mismatch", fmt.Sprintf(`[{ name = "docs", path = %q }]`, good(nil)), `Skill Name Does Not Match SKILL.md.*skills\[0\] is named "docs", but .*SKILL.md names the skill "pdf"`},
		{"duplicate", fmt.Sprintf(`[{ path = %q }, { path = %q }]`, good(nil), good(nil)), `Duplicate Skill Name.*skills\[0\] and skills\[1\] are both named "pdf"`},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		steps = append(steps, resource.TestStep{Config: f.config(skillAgentHCL(c.skillsHCL)), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	steps = append(steps, resource.TestStep{PreConfig: expectAgents(t, f, 0), Config: f.config(""),
		Check: func(*terraformState) error { return expectBlobs(t, f.store()) }})
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps:                    steps,
	})
}
