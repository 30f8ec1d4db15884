package tools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/archive"
	"github.com/trueforge/terraform-provider-trueforge/internal/archive/archivetest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// marker is in the name of everything a hostile archive tries to put outside its
// destination, so that the host can be searched for it afterwards.
const marker = "tf27evil"

// extractFixture is a session of an agent with a sandbox on the real local backend,
// and the host directories its sandbox lives in.
type extractFixture struct {
	env       *harnesstest.Env
	x         *tools.Executor
	call      tools.Call
	sandboxID string
	// sandboxDir is the sandbox's directory on the host; workspace its workspace.
	sandboxDir, workspace string
}

func newExtractFixture(t *testing.T, extractLimits map[string]any) *extractFixture {
	t.Helper()
	env := harnesstest.NewEnv(t)
	sb := harnesstest.Sandbox("default", 15, 60, 120)
	if extractLimits != nil {
		sb["extract_limits"] = extractLimits
	}
	harnesstest.AddAgent(t, env.Store, "unpacker", "", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sb})
	ctx := context.Background()
	a, err := agents.Load(ctx, env.Store, "unpacker")
	if err != nil {
		t.Fatal(err)
	}
	sid := "sess-extract"
	if err := env.Store.CreateSession(ctx, store.Session{ID: sid, Agent: "unpacker", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	m := lifecycle.New(lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}})
	f := &extractFixture{env: env, x: &tools.Executor{Store: env.Store, Sandboxes: m}, call: tools.Call{SessionID: sid, RunID: "run-1", Agent: a, Event: 7}}
	l, err := m.Acquire(ctx, sid, a)
	if err != nil {
		t.Fatal(err)
	}
	f.sandboxID = l.Record.SandboxID
	l.Release(ctx)
	f.sandboxDir = filepath.Join(local.RuntimeRoot(env.Dir), "sandboxes", f.sandboxID)
	f.workspace = filepath.Join(f.sandboxDir, "data", "workspace")
	// The host path is right: a file written through the runtime is there.
	f.put(t, "probe.txt", []byte("probe"))
	if b, err := os.ReadFile(filepath.Join(f.workspace, "probe.txt")); err != nil || string(b) != "probe" {
		t.Fatalf("the workspace is not at %s on the host: %v", f.workspace, err)
	}
	return f
}

// put writes a file into the sandbox's workspace.
func (f *extractFixture) put(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := f.env.Runtime.WriteFile(context.Background(), f.sandboxID, p, strings.NewReader(string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run calls a tool as the model would.
func (f *extractFixture) run(t *testing.T, name string, args map[string]any) tools.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return f.x.Run(context.Background(), f.call, model.ToolCall{ID: "c-" + name, Name: name, Arguments: raw})
}

// hostFiles is every path under the sandbox's directory on the host, and what in the
// host's /tmp carries the marker.
func (f *extractFixture) hostFiles(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	_ = filepath.WalkDir(f.sandboxDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			out[p] = true
		}
		return nil
	})
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if strings.Contains(e.Name(), marker) {
			out[filepath.Join(os.TempDir(), e.Name())] = true
		}
	}
	return out
}

// outside fails the test for every path that appeared on the host outside the
// workspace folder dest, and for any file carrying the marker outside it, wherever
// it is: in the workspace root, beside the workspace, elsewhere in the sandbox's
// directory, or in the host's /tmp. The sandbox's run/ directory, where the runtime
// keeps each command's state, is left out of the first check.
func (f *extractFixture) outside(t *testing.T, before map[string]bool, dest string) {
	t.Helper()
	inDest := filepath.Join(f.workspace, dest)
	for p := range f.hostFiles(t) {
		if p == inDest || strings.HasPrefix(p, inDest+"/") {
			continue
		}
		if strings.Contains(filepath.Base(p), marker) {
			t.Errorf("%s was written outside the destination %s", p, dest)
		}
		if !before[p] && !strings.HasPrefix(p, filepath.Join(f.sandboxDir, "run")+"/") {
			t.Errorf("%s appeared outside the destination %s", p, dest)
		}
	}
}

// lastExtracted is the session's last archive_extracted event.
func (f *extractFixture) lastExtracted(t *testing.T) events.ArchiveExtracted {
	t.Helper()
	evs, err := f.env.Store.EventsOfKind(context.Background(), f.call.SessionID, events.KindArchiveExtracted)
	if err != nil || len(evs) == 0 {
		t.Fatalf("no archive_extracted event: %v", err)
	}
	ev, ok := events.As[events.ArchiveExtracted](evs[len(evs)-1].Kind, evs[len(evs)-1].Payload)
	if !ok {
		t.Fatalf("archive_extracted does not decode: %s", evs[len(evs)-1].Payload)
	}
	return ev
}

// Each hostile archive, placed in the workspace and extracted by the tool, has its bad
// entries refused by name and reason, in the result and in the event; what is fine
// beside them is extracted; and on the host nothing appeared outside the destination.
func TestExtractArchiveHostile(t *testing.T) {
	f := newExtractFixture(t, map[string]any{"max_entries": 20})
	etcPasswd, _ := os.ReadFile("/etc/passwd")
	many := []archivetest.Entry{}
	for i := range 30 {
		many = append(many, archivetest.File(fmt.Sprintf("f%02d", i), "x"))
	}
	cases := []struct {
		name, file string
		archive    []byte
		want       []string // in the result and the event
		made       []string // files in the destination afterwards
		notMade    []string
	}{
		{"zip slip", "slip.zip", archivetest.Zip(t, archivetest.File("../../"+marker, "x"), archivetest.File("sub/../../../"+marker+"2", "x"),
			archivetest.File("ok.txt", "fine")),
			[]string{"../../" + marker + `: the name has a ".." component`, "sub/../../../" + marker + "2"}, []string{"ok.txt"}, nil},
		{"absolute path", "abs.tar", archivetest.TarBytes(t, archivetest.File("/tmp/"+marker, "x"), archivetest.File("/etc/passwd", marker)),
			[]string{"/tmp/" + marker + ": an absolute path", "/etc/passwd: an absolute path"}, nil, nil},
		{"symlink escape", "links.tgz", archivetest.Compressed(t, archivetest.Gzip, archivetest.Symlink("link", "/tmp"), archivetest.File("link/"+marker, "x"),
			archivetest.Symlink("etc", "/etc"), archivetest.File("etc/passwd", marker), archivetest.Symlink("up", "../../"+marker),
			archivetest.Symlink("inside", "ok.txt"), archivetest.File("ok.txt", "fine")),
			[]string{"link: a symbolic link to /tmp", "link/" + marker + ": through a symlink", "etc/passwd: through a symlink", "up: a symbolic link to ../../" + marker},
			[]string{"ok.txt", "inside"}, []string{"link", "etc", "up"}},
		{"hard link", "hard.tar", archivetest.TarBytes(t, archivetest.HardLink("h1", "../../etc/passwd"), archivetest.HardLink("h2", "/etc/passwd"),
			archivetest.File("real", "content"), archivetest.HardLink("h3", "real")),
			[]string{"h1: a hard link to ../../etc/passwd, outside the destination", "h2: a hard link to /etc/passwd, outside the destination"},
			[]string{"real", "h3"}, []string{"h1", "h2"}},
		{"device entries", "dev.tar", archivetest.TarBytes(t, archivetest.Entry{Name: "null", Type: '3', Mode: 0o666}, archivetest.Entry{Name: "sda", Type: '4', Mode: 0o660},
			archivetest.Entry{Name: "fifo", Type: '6', Mode: 0o644}, archivetest.Entry{Name: "su", Body: "#!/bin/sh\n", Mode: 0o755 | fs.ModeSetuid}),
			[]string{"null: a character device", "sda: a block device", "fifo: a FIFO", "set-user-ID, set-group-ID and sticky bits dropped from 1 file: su"},
			[]string{"su"}, []string{"null", "sda", "fifo"}},
		{"ratio bomb", "bomb.tar.zst", archivetest.Bomb(t, marker+"-zeros", 1<<30),
			[]string{"STOPPED (max_ratio)", "times its compressed size", marker + "-zeros was being extracted and was removed"}, nil, []string{marker + "-zeros"}},
		{"too many entries", "many.tar", archivetest.TarBytes(t, many...),
			[]string{"STOPPED (max_entries)", "more than 20 entries (sandbox.extract_limits.max_entries)"}, []string{"f00", "f19"}, []string{"f20"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.put(t, c.file, c.archive)
			dest := "out-" + strings.ReplaceAll(c.name, " ", "-")
			before := f.hostFiles(t)
			res := f.run(t, tools.NameExtractArchive, map[string]any{"path": c.file, "dest": dest})
			ev := f.lastExtracted(t)
			evText, _ := json.Marshal(ev)
			for _, w := range c.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("the result lacks %q:\n%s", w, res.Text)
				}
			}
			if ev.Dest != dest || ev.Archive != c.file || len(ev.Skipped)+len(ev.Stopped) == 0 || ev.SHA256 != digest(c.archive) {
				t.Errorf("event %s", evText)
			}
			for _, name := range c.made {
				if _, err := os.Lstat(filepath.Join(f.workspace, dest, name)); err != nil {
					t.Errorf("%s was not made: %v\n%s", name, err, res.Text)
				}
			}
			for _, name := range c.notMade {
				if _, err := os.Lstat(filepath.Join(f.workspace, dest, name)); err == nil {
					t.Errorf("%s was made\n%s", name, res.Text)
				}
			}
			f.outside(t, before, dest)
		})
	}
	if now, _ := os.ReadFile("/etc/passwd"); string(now) != string(etcPasswd) {
		t.Fatal("the host's /etc/passwd changed")
	}
	// The setuid file lost its bit on disk too.
	if fi, err := os.Stat(filepath.Join(f.workspace, "out-device-entries", "su")); err != nil || fi.Mode()&fs.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("su on the host: %v %v", fi.Mode(), err)
	}
	// The symlink that passed points where the archive said, inside.
	if target, err := os.Readlink(filepath.Join(f.workspace, "out-symlink-escape", "inside")); err != nil || target != "ok.txt" {
		t.Errorf("inside -> %q, %v", target, err)
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// A destination that is not new or empty is refused before anything is written: one
// holding a symlink a command left there, a symlink itself, one under a symlink, and a
// file; nothing changes on the host.
func TestExtractArchiveRefusesUsedDest(t *testing.T) {
	f := newExtractFixture(t, nil)
	f.put(t, "a.tar", archivetest.TarBytes(t, archivetest.File(marker, "x")))
	ctx := context.Background()
	res, err := f.env.Runtime.Exec(ctx, f.sandboxID, sandbox.ExecRequest{Argv: []string{"sh", "-c",
		"mkdir -p full && ln -s /tmp full/planted && ln -s /tmp linkdest && ln -s /tmp linkparent && echo x > afile"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setting up: %v %s", err, res.Stderr)
	}
	before := f.hostFiles(t)
	for dest, want := range map[string]string{
		"full":          "dest full is not empty",
		"linkdest":      "linkdest (dest) is a symlink, not a folder",
		"linkparent/x":  "linkparent (a folder on the way to dest linkparent/x) is a symlink",
		"afile":         "afile (dest) is a file",
		"/etc":          `dest "/etc" is outside /workspace`,
		"/workspace":    "is the workspace itself",
		"/workspace/..": "is the workspace itself",
	} {
		res := f.run(t, tools.NameExtractArchive, map[string]any{"path": "a.tar", "dest": dest})
		if !res.IsError || !strings.Contains(res.Text, want) {
			t.Errorf("dest %s: %q, want %q", dest, res.Text, want)
		}
	}
	f.outside(t, before, "no-such-dest")
	evs, _ := f.env.Store.EventsOfKind(ctx, f.call.SessionID, events.KindArchiveExtracted)
	if len(evs) != 0 {
		t.Errorf("a refused extraction was recorded: %d events", len(evs))
	}
}

// Without dest, the archive goes beside itself under its name less the extension; an
// empty existing folder is fine; a file that is not an archive says so.
func TestExtractArchiveDefaultsAndNotArchive(t *testing.T) {
	f := newExtractFixture(t, nil)
	f.put(t, "data/src.tar.gz", archivetest.Compressed(t, archivetest.Gzip, archivetest.File("a/b.txt", "hello")))
	res := f.run(t, tools.NameExtractArchive, map[string]any{"path": "/workspace/data/src.tar.gz"})
	if res.IsError || !strings.Contains(res.Text, "into data/src/: 1 file (5 bytes)") {
		t.Fatalf("%s", res.Text)
	}
	if b, err := os.ReadFile(filepath.Join(f.workspace, "data/src/a/b.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("data/src/a/b.txt: %q %v", b, err)
	}
	if err := os.Mkdir(filepath.Join(f.workspace, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := f.run(t, tools.NameExtractArchive, map[string]any{"path": "data/src.tar.gz", "dest": "empty"}); res.IsError {
		t.Fatalf("into an empty folder: %s", res.Text)
	}
	f.put(t, "notes.txt", []byte("just text"))
	if res := f.run(t, tools.NameExtractArchive, map[string]any{"path": "notes.txt"}); !res.IsError || !strings.Contains(res.Text, "not an archive this tool reads") {
		t.Fatalf("a text file: %s", res.Text)
	}
}

// A file offered from an extracted folder carries the archive's provenance in its
// lineage (as stored, and as listed), and so does the archive offered itself.
func TestExtractedArtifactCarriesProvenance(t *testing.T) {
	f := newExtractFixture(t, nil)
	tgz := archivetest.Compressed(t, archivetest.Gzip, archivetest.File("report.md", "# Findings\n"))
	f.put(t, "in/repo.tgz", tgz)
	if res := f.run(t, tools.NameExtractArchive, map[string]any{"path": "in/repo.tgz"}); res.IsError {
		t.Fatal(res.Text)
	}
	ex := f.lastExtracted(t)
	res := f.run(t, tools.NameOfferArtifact, map[string]any{"path": "in/repo/report.md"})
	if res.IsError || res.Artifact == nil {
		t.Fatal(res.Text)
	}
	want := store.Provenance{Role: store.ProvenanceExtracted, Extraction: ex.Extraction, Archive: "in/repo.tgz", ArchiveSHA256: digest(tgz), Dest: "in/repo"}
	check := func(what string, got []store.Provenance) {
		t.Helper()
		if len(got) != 1 {
			t.Fatalf("%s: provenance %+v", what, got)
		}
		got[0].ExtractedAt = want.ExtractedAt
		if got[0] != want {
			t.Errorf("%s: provenance %+v, want %+v", what, got[0], want)
		}
	}
	check("the offer's result", res.Artifact.Provenance)
	arts, err := f.env.Store.ListArtifacts(context.Background(), f.call.SessionID)
	if err != nil || len(arts) != 1 {
		t.Fatalf("%d artifacts, %v", len(arts), err)
	}
	check("the stored artifact", arts[0].Provenance)

	res = f.run(t, tools.NameOfferArtifact, map[string]any{"path": "in/repo.tgz"})
	want.Role = store.ProvenanceArchive
	check("the archive itself", res.Artifact.Provenance)

	// A file made elsewhere after the extraction (a report of the repository, say)
	// names the archive as one it may have been made from.
	f.put(t, "elsewhere.txt", []byte("x"))
	res = f.run(t, tools.NameOfferArtifact, map[string]any{"path": "elsewhere.txt"})
	want.Role = store.ProvenanceWorkspace
	check("a file made elsewhere after the extraction", res.Artifact.Provenance)
}

// The tool's defaults are the agent spec's: an agent without extract_limits runs with
// the archive package's defaults.
func TestExtractDefaultsAgree(t *testing.T) {
	l, p := agentspec.DefaultExtractLimits(), archive.DefaultPolicy()
	if int(l.MaxEntries) != p.MaxEntries || l.MaxBytes != p.MaxBytes || float64(l.MaxRatio) != p.MaxRatio {
		t.Fatalf("agentspec %+v, archive %+v", l, p)
	}
}
