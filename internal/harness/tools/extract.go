package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/archive"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// extract_archive unpacks an archive of the workspace into a new or empty folder of it,
// under the agent's sandbox.extract_limits (package archive says what is refused and
// how the limits are counted).
//
// No program in the sandbox parses the archive: the harness reads its bytes out of the
// sandbox (ReadFile, at most MaxArchiveBytes), checks and unpacks them in Go, and writes
// what passes back through the runtime's file calls (WriteFile, which on the local
// backend cannot leave the workspace). So whatever a hostile archive exploits in an
// unpacker, there is none in the sandbox to exploit, and nothing that reads the archive
// has a network: the only processes the extraction starts in the sandbox are `mkdir -p`
// for empty folders and `ln -s` for symlinks, each with an argv and no shell, and
// neither reaches for a network. What is written counts against the sandbox's own
// limits: its disk (the local backend's disk image, Daytona's disk) bounds the files
// like any other write, and the archive's limits stop a bomb long before that.
//
// The destination must not exist yet or be an empty folder, and no folder on the way to
// it may be a symlink: so the extraction never writes through anything that was in the
// workspace before it (a symlink a command left there, pointing elsewhere). Symlinks
// from the archive are made last, after every file, so no write goes through one
// either. Everything made is inside the destination.
const (
	NameExtractArchive = "extract_archive"
	// MaxArchiveBytes is the largest archive the tool reads (the harness holds it in
	// memory while it unpacks it).
	MaxArchiveBytes = 256 << 20
	// maxHardLinkCopy is the largest file a hard link is copied from (read back from the
	// sandbox into memory); a link to a larger one is skipped.
	maxHardLinkCopy = MaxReadBytes
	// maxSkippedShown bounds the skipped entries the result lists.
	maxSkippedShown = 200
	// extractExecTimeout bounds each mkdir and ln.
	extractExecTimeout = 30 * time.Second
	// attachmentsDir is where the user's attachments are written in the workspace
	// (package attachments, which imports this one).
	attachmentsDir = "attachments/"
)

// ExtractArchiveArgs are extract_archive's arguments.
type ExtractArchiveArgs struct {
	Path string `json:"path" jsonschema:"The archive, relative to /workspace: zip, tar, tar.gz, tar.bz2, tar.xz or tar.zst (told by its content, not its name)."`
	Dest string `json:"dest,omitempty" jsonschema:"Folder to extract into, relative to /workspace; it must not exist yet or be empty. Default: the archive's name without its extension, beside it."`
}

// extractArchiveTool is the table entry of extract_archive.
func extractArchiveTool() tool {
	return define(NameExtractArchive,
		"Extract an archive of the workspace (zip, tar, tar.gz, tar.bz2, tar.xz, tar.zst) into a new or empty folder, safely: entries that would "+
			"land outside the folder (absolute paths, .., symlinks or hard links pointing out), devices, FIFOs and names with control characters are "+
			"skipped and listed with the reason, set-user-ID bits are dropped, and limits on entries, bytes and compression ratio stop a "+
			"decompression bomb. Use it instead of tar or unzip for any archive you did not make yourself.",
		withSandboxOn, extractArchive)
}

func extractArchive(ctx context.Context, in invocation, args ExtractArchiveArgs) Result {
	if strings.TrimSpace(args.Path) == "" {
		return failed("extract_archive: path is empty; give the archive's path relative to /workspace")
	}
	src := CleanPath(args.Path)
	dest, msg := extractDest(src, args.Dest)
	if msg != "" {
		return failed("extract_archive: " + msg)
	}
	return in.withSandbox(ctx, []string{dest + "/"}, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		x := &extraction{ctx: ctx, in: in, l: l, src: src, dest: dest}
		return x.run(args.Path)
	})
}

// archiveExts are the names' endings taken off an archive's name to name its folder.
var archiveExts = []string{".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".tgz", ".tbz2", ".tbz", ".txz", ".tzst", ".zip", ".tar"}

// extractDest is the workspace-relative folder to extract src into: dest as given
// (cleaned), else src's name without its archive extension (or with ".extracted" when
// it has none), beside it; or what is wrong with dest.
func extractDest(src, dest string) (string, string) {
	if dest == "" {
		base := path.Base(src)
		name := base + ".extracted"
		for _, ext := range archiveExts {
			if len(base) > len(ext) && strings.HasSuffix(strings.ToLower(base), ext) {
				name = base[:len(base)-len(ext)]
				break
			}
		}
		return CleanPath(path.Join(path.Dir(src), name)), ""
	}
	if strings.HasPrefix(dest, "/") && dest != sandbox.WorkspaceDir && !strings.HasPrefix(dest, sandbox.WorkspaceDir+"/") {
		return "", fmt.Sprintf("dest %q is outside %s; give a folder relative to %s", dest, sandbox.WorkspaceDir, sandbox.WorkspaceDir)
	}
	if d := CleanPath(dest); d != "" && strings.TrimRight(dest, "/") != sandbox.WorkspaceDir {
		return d, ""
	}
	return "", fmt.Sprintf("dest %q is the workspace itself; give a new folder inside it, such as \"unpacked\"", dest)
}

// policyOf is the agent's extract limits as package archive takes them.
func policyOf(a *agents.Agent) archive.Policy {
	l := a.Spec.Sandbox.Extract()
	return archive.Policy{MaxEntries: int(l.MaxEntries), MaxBytes: l.MaxBytes, MaxRatio: float64(l.MaxRatio)}
}

// extraction is one extract_archive call with its sandbox.
type extraction struct {
	ctx       context.Context
	in        invocation
	l         *lifecycle.Lease
	src, dest string
	// dirs are the archive's folders, made together after the files (a folder with
	// files in it is made by writing them; these are for the empty ones); links its
	// symlinks, made last.
	dirs  []string
	links []archive.Entry
	// stripped names the files whose set-user-ID, set-group-ID or sticky bits were
	// dropped; problems what could not be made or undone after passing the checks.
	stripped []string
	problems []string
}

// run reads the archive at p, unpacks it and records what it did.
func (x *extraction) run(p string) (string, bool, bool) {
	rt, id := x.l.Runtime, x.l.Record.SandboxID
	b, err := rt.ReadFile(x.ctx, id, p, MaxArchiveBytes)
	if errors.Is(err, sandbox.ErrTooLarge) {
		return fmt.Sprintf("extract_archive: %s is larger than %d MiB, the most this tool reads; split it, or unpack it with a command "+
			"if you trust it", x.src, MaxArchiveBytes>>20), true, false
	}
	if err != nil {
		return "extract_archive: reading the archive: " + err.Error(), true, isLoss(err)
	}
	if msg, err := x.checkDest(); err != nil || msg != "" {
		if err != nil {
			return "extract_archive: checking dest " + x.dest + ": " + err.Error(), true, isLoss(err)
		}
		return "extract_archive: " + msg, true, false
	}
	rep, werr := archive.Walk(b, policyOf(x.in.c.Agent), x.create)
	if errors.Is(werr, archive.ErrNotArchive) {
		return fmt.Sprintf("extract_archive: %s is %v", x.src, werr), true, false
	}
	x.finish(rep)
	sum := sha256.Sum256(b)
	ev := x.record(rep, hex.EncodeToString(sum[:]), int64(len(b)))
	text := x.report(rep, ev)
	if werr != nil {
		text += "\nextraction failed: " + werr.Error()
	}
	return text, werr != nil || rep.Stopped != nil, werr != nil && isLoss(werr)
}

// checkDest says why the destination cannot be extracted into ("" when it can): it
// must be a new or empty folder with no symlink (nor file) on the way to it.
func (x *extraction) checkDest() (string, error) {
	rt, id := x.l.Runtime, x.l.Record.SandboxID
	parts := strings.Split(x.dest, "/")
	for i := 1; i <= len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		fi, err := rt.StatFile(x.ctx, id, p)
		if errors.Is(err, sandbox.ErrNotFound) {
			return "", nil // made by the extraction, with what is below it
		}
		if err != nil {
			return "", err
		}
		if !fi.Mode.IsDir() {
			what := "a folder on the way to dest " + x.dest
			if i == len(parts) {
				what = "dest"
			}
			return fmt.Sprintf("%s (%s) is a %s, not a folder; extraction never writes through or over one: give a dest that does not exist yet",
				p, what, sandbox.FileType(fi.Mode)), nil
		}
	}
	list, err := rt.ListFiles(x.ctx, id, x.dest, 1)
	if err != nil {
		return "", err
	}
	if len(list.Entries) > 0 || list.Omitted > 0 {
		return fmt.Sprintf("dest %s is not empty; extract into a new or empty folder (give another dest), so that nothing already there is written over or through", x.dest), nil
	}
	return "", nil
}

// at is the workspace path of an archive entry.
func (x *extraction) at(name string) string { return x.dest + "/" + name }

// create makes one accepted entry: a file or a hard link's copy at once, a folder or a
// symlink later (finish).
func (x *extraction) create(e archive.Entry) error {
	rt, id := x.l.Runtime, x.l.Record.SandboxID
	switch e.Kind {
	case archive.Dir:
		x.dirs = append(x.dirs, e.Name)
	case archive.Symlink:
		x.links = append(x.links, e)
	case archive.File:
		if e.Stripped != 0 {
			x.stripped = append(x.stripped, e.Name)
		}
		return rt.WriteFile(x.ctx, id, x.at(e.Name), e.Content, fileMode(e.Mode))
	case archive.HardLink:
		if e.Size > maxHardLinkCopy {
			return &archive.SkipError{Reason: fmt.Sprintf("a hard link to %s, whose %d bytes are more than the %d a link is copied from", e.Target, e.Size, maxHardLinkCopy)}
		}
		b, err := rt.ReadFile(x.ctx, id, x.at(e.Target), maxHardLinkCopy)
		if err != nil {
			return fmt.Errorf("copying %s for the hard link: %w", e.Target, err)
		}
		return rt.WriteFile(x.ctx, id, x.at(e.Name), bytes.NewReader(b), fileMode(e.Mode))
	}
	return nil
}

// fileMode is the mode a file is written with: the archive's permission bits (0 asks
// WriteFile's default, 0644, which an entry of mode 0 gets too).
func fileMode(m fs.FileMode) fs.FileMode { return m.Perm() }

// finish removes the file a limit cut short, then makes the folders and the symlinks.
func (x *extraction) finish(rep *archive.Report) {
	rt, id := x.l.Runtime, x.l.Record.SandboxID
	if s := rep.Stopped; s != nil && s.Partial && s.Entry != "" {
		if err := rt.DeleteFile(x.ctx, id, x.at(s.Entry)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			x.problems = append(x.problems, fmt.Sprintf("%s was cut short by the stop and could not be removed: %v", s.Entry, err))
		}
	}
	for i := 0; i < len(x.dirs); i += 200 {
		argv := []string{"mkdir", "-p", "--"}
		for _, d := range x.dirs[i:min(i+200, len(x.dirs))] {
			argv = append(argv, path.Join(sandbox.WorkspaceDir, x.at(d)))
		}
		if msg := x.exec(argv); msg != "" {
			x.problems = append(x.problems, "folders could not be made: "+msg)
		}
	}
	for _, e := range x.links {
		if msg := x.exec([]string{"ln", "-s", "--", e.Target, path.Join(sandbox.WorkspaceDir, x.at(e.Name))}); msg != "" {
			x.problems = append(x.problems, fmt.Sprintf("symlink %s -> %s could not be made: %s", e.Name, e.Target, msg))
			rep.Symlinks--
		}
	}
}

// exec runs argv in the sandbox (no shell), and says how it failed ("" when it did not).
func (x *extraction) exec(argv []string) string {
	res, err := x.l.Runtime.Exec(x.ctx, x.l.Record.SandboxID, sandbox.ExecRequest{Argv: argv, Timeout: extractExecTimeout, OutputCap: 4096})
	switch {
	case err != nil:
		return err.Error()
	case res.ExitCode != 0:
		return fmt.Sprintf("exit code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return ""
}
