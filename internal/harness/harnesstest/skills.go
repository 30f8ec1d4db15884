package harnesstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// SkillFolder writes a skill folder: a SKILL.md naming the skill name (described as
// "Does <name> things."), and files (path -> content; a path ending in "*" is made
// executable). It returns the folder's path.
func SkillFolder(tb testing.TB, name string, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), name)
	all := map[string]string{skills.Manifest: fmt.Sprintf("---\nname: %s\ndescription: Does %s things.\n---\n\n# %s\n\nRun the scripts in scripts/.\n", name, name, name)}
	for p, c := range files {
		all[p] = c
	}
	for p, c := range all {
		WriteSkillFile(tb, dir, p, c)
	}
	return dir
}

// WriteSkillFile writes (or rewrites) one file of a skill folder; a path ending in "*"
// is made executable.
func WriteSkillFile(tb testing.TB, dir, p, content string) {
	tb.Helper()
	mode := os.FileMode(0o644)
	if strings.HasSuffix(p, "*") {
		p, mode = strings.TrimSuffix(p, "*"), 0o755
	}
	full := filepath.Join(dir, filepath.FromSlash(p))
	must(tb, os.MkdirAll(filepath.Dir(full), 0o755))
	must(tb, os.WriteFile(full, []byte(content), mode))
	must(tb, os.Chmod(full, mode))
}

// PublishSkill reads skill folder dir as apply does: the entry the agent's spec lists,
// and the content stored with it.
func PublishSkill(tb testing.TB, dir string) (agentspec.Skill, store.SkillBlob) {
	tb.Helper()
	b, err := skills.Read(dir)
	if err != nil {
		tb.Fatalf("skill folder %s: %v", dir, err)
	}
	return agentspec.Skill{Name: b.Name, Path: dir, Description: b.Description, Digest: b.Digest},
		store.SkillBlob{Digest: b.Digest, Content: b.Encoded}
}

// ApplyAgent rewrites agent s as an apply of a changed configuration does: its spec, and
// the content of its skills (content it no longer references is collected).
func ApplyAgent(tb testing.TB, st *store.Store, s agentspec.Spec, blobs ...store.SkillBlob) {
	tb.Helper()
	must(tb, st.UpdateAgent(context.Background(), store.Agent{Name: s.Name, Environment: s.EnvironmentRef(), Spec: s.Encode(), Skills: blobs}))
}
