package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Skills: the agent's skills are listed, name and description, in the description of
// load_skill, built from the spec alone, so listing them provisions nothing. Calling it
// reads the skill's content from the control plane by the digest apply published (and
// checks it: skills.Decode), acquires the session's sandbox (provisioning it then), and
// writes the folder at .skills/<name>/ in the workspace, files 0644 (0755 when
// executable), then makes it read-only (chmod -R a-w) where the sandbox has a shell. A
// skill_loaded event records it with the sandbox's id, so a second load in the same
// sandbox writes nothing, and a replaced sandbox (lost, deleted after idling) gets the
// files again. A sandbox keeps the version it loaded, as it keeps its environment: a
// skill re-applied since reaches the session's next sandbox. The sandbox user owns its
// copy and may change it; that changes only that sandbox (a copy it removed is written
// again by the next load).

// NameLoadSkill is the skill tool's name.
const NameLoadSkill = "load_skill"

// LoadSkillArgs are load_skill's arguments.
type LoadSkillArgs struct {
	Name string `json:"name" jsonschema:"The skill to load: one of the names listed in this tool's description."`
}

// loadSkillTool is the table entry of load_skill: offered to agents with a sandbox and
// at least one skill, described by their skills.
func loadSkillTool() tool {
	return describedBy(define(NameLoadSkill, "", withSkills, loadSkill), skillsDescription)
}

func withSkills(a *agents.Agent) bool { return withSandboxOn(a) && len(a.Spec.Skills) > 0 }

// describedBy sets t's description from the agent it is offered to.
func describedBy(t tool, describe func(*agents.Agent) string) tool {
	t.describe = describe
	return t
}

// skillsDescription is load_skill's description: what it does, then each skill's name
// and description (at most skills.MaxPerAgent of skills.MaxDescriptionChars each, as
// the provider enforces).
func skillsDescription(a *agents.Agent) string {
	var b strings.Builder
	b.WriteString("Load one of your skills into the sandbox: its folder is copied, read-only, to .skills/<name>/ in the workspace " +
		"(exec's working directory), and you get its SKILL.md (how to use it) and its file list. When a task matches a skill's description, " +
		"load it first and follow its SKILL.md; run its scripts with exec. A skill is copied once per sandbox: loading it again only shows it.\n\nSkills:")
	for _, s := range a.Spec.Skills {
		desc := strings.Join(strings.Fields(s.Description), " ")
		if desc == "" {
			desc = "(no description published: apply the agent again)"
		}
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, desc)
	}
	return b.String()
}

func loadSkill(ctx context.Context, in invocation, args LoadSkillArgs) Result {
	sk, ok := findSkill(in.c.Agent, args.Name)
	if !ok {
		var names []string
		for _, s := range in.c.Agent.Spec.Skills {
			names = append(names, s.Name)
		}
		return failed(fmt.Sprintf("load_skill: there is no skill %q; this agent's skills are: %s", args.Name, strings.Join(names, ", ")))
	}
	if sk.Digest == "" {
		return failed(fmt.Sprintf("load_skill: skill %q was published by a provider that did not store skills' files; "+
			"run terraform apply with this release to publish it, then try again", sk.Name))
	}
	// Read and check the content before any sandbox is acquired: a skill that cannot be
	// loaded provisions nothing.
	raw, err := in.x.Store.GetSkillBlob(ctx, sk.Digest)
	if errors.Is(err, store.ErrNotFound) {
		return failed(fmt.Sprintf("load_skill: the content of skill %q (%s) is no longer in the control plane: the agent was applied again "+
			"after this run started. Send the message again to run with the agent as published now.", sk.Name, sk.Digest))
	}
	if err != nil {
		return failed("load_skill: " + err.Error())
	}
	b, err := skills.Decode(raw, sk.Digest)
	if err != nil {
		return failed(fmt.Sprintf("load_skill: skill %q: %v", sk.Name, err))
	}
	dir := skills.WorkspaceDir + "/" + sk.Name
	return in.withSandbox(ctx, []string{dir + "/"}, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		prior, err := loadedIn(ctx, in.x.Store, in.c.SessionID, l.Record.SandboxID, sk.Name)
		if err != nil {
			return "load_skill: " + err.Error(), true, false
		}
		if prior != nil {
			// Loaded before; unless the sandbox has since removed its copy (its own to
			// change), nothing is written again.
			_, err := l.Runtime.StatFile(ctx, l.Record.SandboxID, prior.Path+"/"+skills.Manifest)
			if err == nil {
				return alreadyLoaded(ctx, l, b, *prior), false, false
			}
			if !errors.Is(err, sandbox.ErrNotFound) {
				return "load_skill: " + err.Error(), true, isLoss(err)
			}
		}
		readOnly, err := materialize(ctx, l, dir, b)
		if err != nil {
			if ctx.Err() != nil {
				return "cancelled: the skill was not loaded", true, false
			}
			return fmt.Sprintf("load_skill: writing skill %q into the sandbox: %v", sk.Name, err), true, isLoss(err)
		}
		ev := events.SkillLoaded{Name: b.Name, Digest: b.Digest, SandboxID: l.Record.SandboxID, Generation: l.Record.Generation,
			Path: dir, Files: len(b.Files), Bytes: b.Size, ReadOnly: readOnly}
		if _, err := events.Append(context.WithoutCancel(ctx), in.x.Store, in.c.SessionID, "", ev); err != nil {
			// The files are there; only the record is missing, so a later load writes
			// them again.
			return loadedText(b, dir, readOnly) + "\n[the load could not be recorded: " + err.Error() + "]", false, false
		}
		return loadedText(b, dir, readOnly), false, false
	})
}

func findSkill(a *agents.Agent, name string) (agents.Skill, bool) {
	for _, s := range a.Spec.Skills {
		if s.Name == name {
			return s, true
		}
	}
	return agents.Skill{}, false
}

// loadedIn is the latest load of skill name into sandbox sandboxID recorded in the
// session's log, or nil.
func loadedIn(ctx context.Context, st *store.Store, sessionID, sandboxID, name string) (*events.SkillLoaded, error) {
	evs, err := st.EventsOfKind(ctx, sessionID, events.KindSkillLoaded)
	if err != nil {
		return nil, err
	}
	var found *events.SkillLoaded
	for _, e := range evs {
		if p, ok := events.As[events.SkillLoaded](e.Kind, e.Payload); ok && p.SandboxID == sandboxID && p.Name == name {
			found = &p
		}
	}
	return found, nil
}

// materialize writes b's files under dir in the lease's sandbox, and makes the folder
// read-only where it can (reporting whether it did). Whatever dir held before (a load cut
// short, or the model's own files) is removed first.
func materialize(ctx context.Context, l *lifecycle.Lease, dir string, b *skills.Bundle) (bool, error) {
	rt, id := l.Runtime, l.Record.SandboxID
	if _, err := rt.StatFile(ctx, id, dir); err == nil {
		res, err := rt.Exec(ctx, id, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", `chmod -R u+w -- "$1" 2>/dev/null; rm -rf -- "$1"`, "sh", dir},
			Timeout: time.Minute})
		if err != nil {
			return false, fmt.Errorf("removing what %s held: %w", dir, err)
		}
		if res.ExitCode != 0 {
			return false, fmt.Errorf("removing what %s held: exit %d: %s", dir, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return false, err
	}
	for _, f := range b.Files {
		mode := fs.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		if err := rt.WriteFile(ctx, id, dir+"/"+f.Path, bytes.NewReader(f.Content), mode); err != nil {
			return false, err
		}
	}
	res, err := rt.Exec(ctx, id, sandbox.ExecRequest{Argv: []string{"chmod", "-R", "a-w", "--", dir}, Timeout: time.Minute})
	return err == nil && res.ExitCode == 0, nil
}

// loadedText is what the model gets for a skill just written: where it is, its files,
// and its SKILL.md.
func loadedText(b *skills.Bundle, dir string, readOnly bool) string {
	ro := "read-only"
	if !readOnly {
		ro = "could not be made read-only"
	}
	return fmt.Sprintf("Loaded skill %q (%s) into %s/ in the workspace (%s; %d files, %d bytes). Paths below are relative to that folder; "+
		"run its scripts with exec, for example %s/<script>.\n\n%s", b.Name, b.Digest, dir, ro, len(b.Files), b.Size, dir, describeSkill(b))
}

// alreadyLoaded is what the model gets for a skill this sandbox already has: the same
// files, or the version it loaded before one published since.
func alreadyLoaded(ctx context.Context, l *lifecycle.Lease, b *skills.Bundle, prior events.SkillLoaded) string {
	if prior.Digest == b.Digest {
		return fmt.Sprintf("Skill %q is already loaded in this sandbox at %s/ (not copied again).\n\n%s", b.Name, prior.Path, describeSkill(b))
	}
	text := fmt.Sprintf("Skill %q was loaded into this sandbox earlier at %s/, version %s, and stays as it is: a sandbox keeps the version it "+
		"loaded. The version published since (%s) reaches this session's next sandbox.", b.Name, prior.Path, prior.Digest, b.Digest)
	md, err := l.Runtime.ReadFile(ctx, l.Record.SandboxID, prior.Path+"/"+skills.Manifest, skills.MaxSkillMDBytes)
	if err != nil {
		return text + " Its SKILL.md could not be read: " + err.Error()
	}
	return text + "\n\nSKILL.md (as in the sandbox):\n" + string(md)
}

// describeSkill lists a skill's files and shows its SKILL.md.
func describeSkill(b *skills.Bundle) string {
	var s strings.Builder
	s.WriteString("Files:\n")
	for _, f := range b.Files {
		x := ""
		if f.Executable {
			x = ", executable"
		}
		fmt.Fprintf(&s, "  %s (%d bytes%s)\n", f.Path, len(f.Content), x)
	}
	s.WriteString("\nSKILL.md:\n")
	s.Write(b.SkillMD())
	return s.String()
}
