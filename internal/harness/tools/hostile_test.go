package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestMain(m *testing.M) {
	backends.ReexecMain() // the local backend re-executes this test binary as its helpers
	os.Exit(m.Run())
}

// hostileTools is a session "s-hostile" of an agent with a real local sandbox and
// downloads, whose sandbox holds sandboxtest.HostileScript's workspace, and a way to
// call its tools as the model would.
type hostileTools struct {
	t    *testing.T
	st   *store.Store
	x    *tools.Executor
	call tools.Call
	n    int
}

func newHostileTools(t *testing.T) *hostileTools {
	env := harnesstest.NewEnv(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, env.Store, "hostile", "default", harnesstest.AgentSpec{"model": harnesstest.Script(),
		"sandbox": harnesstest.Sandbox("default", 30, 60, 120)})
	a, err := agents.Load(ctx, env.Store, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.CreateSession(ctx, store.Session{ID: "s-hostile", Agent: "hostile", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	m := lifecycle.New(lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}})
	h := &hostileTools{t: t, st: env.Store, x: &tools.Executor{Store: env.Store, Sandboxes: m},
		call: tools.Call{SessionID: "s-hostile", User: harnesstest.Owner, Agent: a, Event: 1}}
	start := time.Now()
	if res := h.run("exec", map[string]any{"command": sandboxtest.HostileScript, "timeout_seconds": 120}); res.IsError {
		t.Fatalf("making the hostile workspace: %s", res.Text)
	}
	t.Logf("made the hostile workspace in %s", time.Since(start))
	return h
}

// run calls tool name with args as the model would, and logs how long it took.
func (h *hostileTools) run(name string, args map[string]any) tools.Result {
	h.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		h.t.Fatal(err)
	}
	h.n++
	start := time.Now()
	res := h.x.Run(context.Background(), h.call, model.ToolCall{ID: fmt.Sprintf("call-%d", h.n), Name: name, Arguments: b})
	h.t.Logf("%s %s: %s, error %v, %d bytes", name, b[:min(len(b), 60)], time.Since(start), res.IsError, len(res.Text))
	return res
}

// The model's tools on hostile workspace content: list_files is bounded and shows
// every name on one line, quoted when it must be; read_file and offer_artifact refuse
// the 10 GB sparse file from its size, at once; a name with a newline or quotes is
// offered as it is; links are never followed.
func TestHostileWorkspaceThroughTheTools(t *testing.T) {
	h := newHostileTools(t)
	top := h.run("list_files", map[string]any{})
	checkListing(t, top, 0)
	t.Logf("the workspace, as the model sees it:\n%s", top.Text)
	for _, want := range []string{`"new\nline"`, `"quo\"te's"`, "\t...\n", `"bad\xff\xfe"`, `"esc\x1b[2J\u202etxt"`,
		"not UTF-8 and cannot be given to a file tool", "Lrwxrwxrwx\t5\tloop1"} {
		if !strings.Contains(top.Text, want) {
			t.Errorf("the workspace's listing lacks %q:\n%s", want, top.Text)
		}
	}
	many := h.run("list_files", map[string]any{"dir": "many"})
	checkListing(t, many, tools.MaxListEntries)
	if !strings.Contains(many.Text, "[99800 more entries not shown: list a subdirectory, or use exec") || many.Truncated {
		t.Errorf("the listing of 100,000 files says %q at its end (cut %v)", many.Text[max(0, len(many.Text)-200):], many.Truncated)
	}

	for _, c := range []struct{ tool, cap string }{{"read_file", "over 262144"}, {"offer_artifact", "over 16777216"}} {
		start := time.Now()
		res := h.run(c.tool, map[string]any{"path": "big.img"})
		if !res.IsError || !strings.Contains(res.Text, "file too large: 10737418240 bytes, "+c.cap) || time.Since(start) > 5*time.Second {
			t.Errorf("%s of the 10 GB sparse file: %q after %s; want a refusal naming its size and the cap, at once", c.tool, res.Text, time.Since(start))
		}
	}
	for _, p := range []string{"loop1", "self", "up", "root"} {
		if res := h.run("read_file", map[string]any{"path": p}); !res.IsError || !strings.Contains(res.Text, "not a regular file") {
			t.Errorf("read_file %s: %q; want a refusal to follow the link", p, res.Text)
		}
		if res := h.run("list_files", map[string]any{"dir": p}); !res.IsError || !strings.Contains(res.Text, "not a directory but a symlink") {
			t.Errorf("list_files %s: %q; want a refusal to follow the link", p, res.Text)
		}
	}
	// A name that is not UTF-8 cannot be named in JSON: the call gets "no such file",
	// as the listing's note warned, never another file.
	if res := h.run("read_file", map[string]any{"path": "bad\xff\xfe"}); !res.IsError || !strings.Contains(res.Text, "not found") {
		t.Errorf("read_file of an invalid UTF-8 name: %q", res.Text)
	}
	checkHostileOffers(t, h)
}

// checkListing checks a list_files result: one entry a line (mode, size, name), no raw
// control character, valid UTF-8, every note in brackets, and want entries when want
// is not 0.
func checkListing(t *testing.T, res tools.Result, want int) {
	t.Helper()
	if res.IsError || !utf8.ValidString(res.Text) {
		t.Fatalf("list_files: error %v, valid UTF-8 %v:\n%s", res.IsError, utf8.ValidString(res.Text), res.Text)
	}
	entries := 0
	for _, line := range strings.Split(res.Text, "\n") {
		if strings.HasPrefix(line, "[") {
			continue
		}
		f := strings.Split(line, "\t")
		if _, err := strconv.ParseInt(f[min(1, len(f)-1)], 10, 64); len(f) != 3 || err != nil || strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f || r == 0x202e }) {
			t.Errorf("list_files line %q is not mode<TAB>size<TAB>name with the name escaped", line)
		}
		entries++
	}
	if want != 0 && entries != want {
		t.Errorf("list_files showed %d entries; want %d", entries, want)
	}
}

// checkHostileOffers: a file named with a newline, and one with quotes, are offered
// under their names, and the offer's lineage is bounded however many and however long
// the session's commands were.
func checkHostileOffers(t *testing.T, h *hostileTools) {
	var ran []string
	for i := range 150 {
		ran = append(ran, fmt.Sprintf("printf x > \"$(printf 'new\\nline')\" # %d %s", i, strings.Repeat("é", 5000)))
	}
	h.call.Commands = func() []string { return ran }
	for _, name := range []string{"new\nline", `quo"te's`} {
		res := h.run("offer_artifact", map[string]any{"path": name})
		if res.IsError || res.Artifact == nil || res.Artifact.Path != name || strings.Count(res.Text, "\n") != 0 || !strings.Contains(res.Text, strconv.Quote(name)) {
			t.Fatalf("offering %q: %q %+v; want it offered under its name, shown quoted on one line", name, res.Text, res.Artifact)
		}
	}
	a, err := h.st.GetArtifact(context.Background(), "s-hostile", "new\nline")
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Content) != "x" || len(a.Commands) != tools.MaxLineageCommands+1 || a.Commands[0] != "[50 earlier commands not recorded]" {
		t.Fatalf("the stored offer: %q, %d commands, first %q", a.Content, len(a.Commands), a.Commands[0])
	}
	for _, c := range a.Commands[1:] {
		if len(c) > tools.MaxLineageCommandBytes+64 || !utf8.ValidString(c) || !strings.HasSuffix(c, "more bytes not recorded]") {
			t.Fatalf("a recorded command of %d bytes (valid UTF-8 %v) ends %q", len(c), utf8.ValidString(c), c[max(0, len(c)-60):])
		}
	}
	if !strings.Contains(a.Commands[1], "# 50 ") {
		t.Errorf("the first command kept is %q; want the 51st", a.Commands[1][:60])
	}
}
