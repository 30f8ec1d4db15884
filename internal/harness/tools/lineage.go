package tools

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Lineage of an artifact's packages: the digest of the manifest of the snapshot its
// sandbox came from, and the packages the session installed on top of it, found by
// running manifest.ReaderScript in the sandbox and diffing its result with the
// snapshot's manifest.
const (
	// lineageTimeout bounds the reader's run in the sandbox.
	lineageTimeout = 30 * time.Second
	// lineageOutputCap bounds the reader's output.
	lineageOutputCap = 32 << 20
	// lineageTTL is how long a read serves later offers of the same sandbox with no
	// command run in between (Code Mode scripts and written files are not commands, so
	// the read is taken again after this at the latest).
	lineageTTL = time.Minute
	// lineageEntries bounds the cache (one entry per live sandbox).
	lineageEntries = 1024
)

// Bounds of the commands an artifact records as its lineage (Artifact.Commands): they
// are the model's exec commands in the sandbox, which nothing else bounds, and every
// offer stores them in its row and its tool_result event, so a session of thousands of
// commands, or one command of a megabyte (a heredoc writing a file), must not make
// every offer that large.
const (
	// MaxLineageCommands is how many commands an artifact records: the last ones,
	// after a first entry that says how many earlier ones were left out.
	MaxLineageCommands = 100
	// MaxLineageCommandBytes bounds one recorded command: a longer one keeps its first
	// bytes (whole characters) and says how many more it had.
	MaxLineageCommandBytes = 4096
)

// boundCommands is cmds as an artifact records them (MaxLineageCommands,
// MaxLineageCommandBytes); nil stays nil.
func boundCommands(cmds []string) []string {
	if cmds == nil {
		return nil
	}
	out := make([]string, 0, min(len(cmds), MaxLineageCommands)+1)
	if n := len(cmds) - MaxLineageCommands; n > 0 {
		out = append(out, fmt.Sprintf("[%d earlier commands not recorded]", n))
		cmds = cmds[n:]
	}
	for _, c := range cmds {
		if len(c) > MaxLineageCommandBytes {
			cut := runeBoundary(c, MaxLineageCommandBytes)
			c = fmt.Sprintf("%s[... %d more bytes not recorded]", c[:cut], len(c)-cut)
		}
		out = append(out, c)
	}
	return out
}

type lineageEntry struct {
	commands int // commands run in the sandbox when it was read
	at       time.Time
	digest   string
	installs []manifest.Package
}

// lineageCache holds the last read per sandbox generation, so that offering ten files
// in a row reads the sandbox's databases once.
var lineageCache = struct {
	sync.Mutex
	m map[string]lineageEntry
}{m: map[string]lineageEntry{}}

// sessionLineage returns the manifest digest of the lease's snapshot ("" when none is
// recorded) and the packages installed during the session. commands is how many
// commands have run in the sandbox so far: a new one invalidates the cached read. A
// failed read leaves installs nil; the offer goes on (lineage is a record, not a gate).
func (in invocation) sessionLineage(ctx context.Context, l *lifecycle.Lease, commands int) (string, []manifest.Package) {
	key := fmt.Sprintf("%s/%d", l.Record.SandboxID, l.Record.Generation)
	now := time.Now()
	lineageCache.Lock()
	e, ok := lineageCache.m[key]
	lineageCache.Unlock()
	if ok && e.commands == commands && now.Sub(e.at) < lineageTTL {
		return e.digest, e.installs
	}
	sm, err := in.x.Store.GetSnapshotManifest(ctx, l.Record.SnapshotID)
	if err != nil {
		// No manifest of the snapshot (taken before manifests existed, or its
		// extraction failed): nothing to diff against.
		return "", nil
	}
	res, err := l.Runtime.Exec(ctx, l.Record.SandboxID, sandbox.ExecRequest{Shell: manifest.ReaderScript, Timeout: lineageTimeout, OutputCap: lineageOutputCap})
	if err != nil || res.ExitCode != 0 || res.Truncated {
		return sm.Digest, nil
	}
	live, err := manifest.ExtractDump(bytes.NewReader(res.Stdout))
	if err != nil {
		return sm.Digest, nil
	}
	installs, _ := manifest.Diff(sm.Manifest, live)
	lineageCache.Lock()
	if len(lineageCache.m) >= lineageEntries {
		clear(lineageCache.m)
	}
	lineageCache.m[key] = lineageEntry{commands: commands, at: now, digest: sm.Digest, installs: installs}
	lineageCache.Unlock()
	return sm.Digest, installs
}
