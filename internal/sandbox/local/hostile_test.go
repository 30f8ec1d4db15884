//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// The local runtime's file calls on hostile workspace content (sandboxtest.HostileScript):
// each answers at once, bounded, and names come back byte for byte.
func TestHostileWorkspaceContent(t *testing.T) {
	r := newSandbox(t)
	ctx := context.Background()
	start := time.Now()
	mustSh(t, r, "sb", sandboxtest.HostileScript)
	t.Logf("made the hostile workspace in %s", time.Since(start))

	top := timed(t, "listing the workspace", func() (sandbox.FileList, error) { return r.ListFiles(ctx, "sb", "", 0) })
	types := map[string]string{}
	for _, e := range top.Entries {
		types[e.Path] = sandbox.FileType(e.Mode)
	}
	for _, n := range sandboxtest.HostileNames {
		if types[n] != "file" {
			t.Errorf("%q lists as %q; want a file (listing %q)", n, types[n], types)
		}
	}
	for _, n := range sandboxtest.HostileLinks {
		if types[n] != "symlink" {
			t.Errorf("%q lists as %q; want a symlink, not followed", n, types[n])
		}
	}
	if top.Omitted != 0 || types["many"] != "dir" || types["big.img"] != "file" {
		t.Errorf("workspace listing: %+v", top)
	}

	many := timed(t, "listing 100,000 files", func() (sandbox.FileList, error) { return r.ListFiles(ctx, "sb", "many", 0) })
	if len(many.Entries) != sandbox.DefaultListEntries || many.Omitted != 100000-sandbox.DefaultListEntries || many.OmittedAtLeast ||
		many.Entries[0].Path != "many/1" || many.Entries[1].Path != "many/10" || many.Entries[2].Path != "many/100" {
		t.Fatalf("many/: %d entries from %v, omitted %d (at least %v)", len(many.Entries), many.Entries[:min(3, len(many.Entries))], many.Omitted, many.OmittedAtLeast)
	}
	if note := many.OmittedNote(); note != "99000 more entries not shown" {
		t.Errorf("note %q", note)
	}
	all := timed(t, "listing 100,000 files whole", func() (sandbox.FileList, error) { return r.ListFiles(ctx, "sb", "many", 200000) })
	if len(all.Entries) != 100000 || all.Omitted != 0 {
		t.Errorf("many/ asked whole: %d entries, omitted %d", len(all.Entries), all.Omitted)
	}

	// Over the scan cap, the listing stops reading and says it did.
	listScan = 50000
	capped := timed(t, "listing past the scan cap", func() (sandbox.FileList, error) { return r.ListFiles(ctx, "sb", "many", 10) })
	listScan = sandbox.MaxListScan
	if len(capped.Entries) != 10 || capped.Omitted != 50000-10 || !capped.OmittedAtLeast ||
		!strings.HasPrefix(capped.OmittedNote(), "at least 49990 more entries") {
		t.Errorf("past the scan cap: %d entries, omitted %d, at least %v, %q", len(capped.Entries), capped.Omitted, capped.OmittedAtLeast, capped.OmittedNote())
	}

	checkHostileFileCalls(t, r)
}

// checkHostileFileCalls: the sparse file, the links and the names, through StatFile,
// ReadFile and ListFiles.
func checkHostileFileCalls(t *testing.T, r *Runtime) {
	ctx := context.Background()
	start := time.Now()
	if fi, err := r.StatFile(ctx, "sb", "big.img"); err != nil || fi.Size != 10<<30 {
		t.Errorf("stat of the sparse file: %+v %v", fi, err)
	}
	if _, err := r.ReadFile(ctx, "sb", "big.img", 0); !errors.Is(err, sandbox.ErrTooLarge) || !strings.Contains(err.Error(), "10737418240 bytes") {
		t.Errorf("reading the 10 GB sparse file: %v; want ErrTooLarge naming its size", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the 10 GB sparse file took %s to stat and refuse: it was read", took)
	}
	for _, n := range sandboxtest.HostileNames {
		if b, err := r.ReadFile(ctx, "sb", n, 0); err != nil || string(b) != "x" {
			t.Errorf("reading %q: %q %v", n, b, err)
		}
	}
	for _, p := range []string{"loop1", "self", "up", "root"} {
		if _, err := r.ListFiles(ctx, "sb", p, 0); err == nil || !strings.Contains(err.Error(), "not a directory but a symlink") {
			t.Errorf("listing the link %s as a directory: %v; want it refused, not followed", p, err)
		}
		if _, err := r.ReadFile(ctx, "sb", p, 0); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("reading the link %s: %v; want ErrNotRegular", p, err)
		}
	}
	for _, p := range []string{"up/workspace/...", "root/etc/passwd", "loop1/x", "self/x", "loop2/x/y"} {
		start := time.Now()
		_, err := r.ReadFile(ctx, "sb", p, 0)
		_, serr := r.StatFile(ctx, "sb", p)
		if !errors.Is(err, sandbox.ErrNotRegular) || !errors.Is(serr, sandbox.ErrNotRegular) || time.Since(start) > time.Second {
			t.Errorf("reading %s through a link: %v, stat %v, after %s; want ErrNotRegular at once", p, err, serr, time.Since(start))
		}
	}
}

// timed runs a listing, fails t on an error and logs how long it took; a listing
// over 5 s fails (the whole 100,000 names take well under one on 2 cores).
func timed(t *testing.T, what string, list func() (sandbox.FileList, error)) sandbox.FileList {
	t.Helper()
	start := time.Now()
	l, err := list()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: %d entries, %s, in %s", what, len(l.Entries), fmt.Sprint(l.Omitted, " omitted"), took)
	if took > 5*time.Second {
		t.Errorf("%s took %s", what, took)
	}
	return l
}
