//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Runtime runs sandboxes on snapshots of a Builder. It implements sandbox.Runtime.
//
// On-disk layout under the runtime root (created 0700):
//
//	sandboxes/<id>/         one directory per sandbox; it appears atomically (made in tmp/)
//	  state.json            sandbox.SandboxInfo: snapshot, status, env, network
//	  lock                  flock: shared while an Exec starts, exclusive for Stop/Start/Delete
//	  upper/usr/            upper directory of the usr overlay (layers' usr over host /usr)
//	  upper/rest/           upper directory of the overlay of the layer roots, of which
//	                        the other TopDirs are bound (two mounts per exec, not seven)
//	  workspace/            bound read-write at /workspace
//	  mnt/usr, mnt/rest     mount points; the overlays exist only in each exec's namespace
//	  run/<exec>/           one per running exec: pid ("<pid> <start time>") and the
//	                        overlay workdirs of its mounts (work/usr, work/rest); removed
//	                        when it ends
//	tmp/                    staging and trash
//
// Like the Builder, a Runtime keeps no state in memory: another process (a restarted
// harness) with a Runtime on the same root finds the sandboxes and can stop them.
type Runtime struct {
	// MaxFileSize caps ReadFile (when no max is given) and WriteFile; 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
	// KillWait bounds how long Stop and a timed-out Exec wait for the sandbox's processes
	// to disappear after SIGKILL; 0 means 10 s.
	KillWait time.Duration

	b       *Builder
	root    string
	bwrap   string
	unshare string
	mount   string
}

// DefaultMaxFileSize is the file size cap of ReadFile and WriteFile.
const DefaultMaxFileSize = 64 << 20

// Sandbox user and group inside: unprivileged, owning /workspace.
const sandboxUID = "1000"

var _ sandbox.Runtime = (*Runtime)(nil)

// NewRuntime returns a Runtime creating sandboxes from the snapshots of b and keeping
// them under root.
func NewRuntime(b *Builder, root string) (*Runtime, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local: runtime root %q: %w", root, err)
	}
	if err := checkOverlayPath(abs); err != nil {
		return nil, fmt.Errorf("local: runtime root: %w", err)
	}
	r := &Runtime{b: b, root: abs}
	for _, t := range []struct {
		dst  *string
		name string
	}{{&r.bwrap, "bwrap"}, {&r.unshare, "unshare"}, {&r.mount, "mount"}} {
		if *t.dst, err = findTool(t.name); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{r.root, r.sandboxesDir(), r.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("local: create runtime directory %s: %w", d, err)
		}
	}
	return r, nil
}

func (r *Runtime) sandboxesDir() string    { return filepath.Join(r.root, "sandboxes") }
func (r *Runtime) tmpDir() string          { return filepath.Join(r.root, "tmp") }
func (r *Runtime) dir(id string) string    { return filepath.Join(r.sandboxesDir(), id) }
func (r *Runtime) wsDir(id string) string  { return filepath.Join(r.dir(id), "workspace") }
func (r *Runtime) runDir(id string) string { return filepath.Join(r.dir(id), "run") }

func (r *Runtime) killWait() time.Duration {
	if r.KillWait > 0 {
		return r.KillWait
	}
	return killWait
}

func (r *Runtime) maxFile() int64 {
	if r.MaxFileSize > 0 {
		return r.MaxFileSize
	}
	return DefaultMaxFileSize
}

// Create makes a sandbox on a Ready snapshot. It starts no process: the sandbox is
// Running (accepts Exec) at once.
func (r *Runtime) Create(ctx context.Context, req sandbox.CreateRequest) error {
	if err := r.create(ctx, req); err != nil {
		return fmt.Errorf("local: create sandbox %s: %w", req.ID, err)
	}
	return nil
}

func (r *Runtime) create(ctx context.Context, req sandbox.CreateRequest) error {
	if err := validID(req.ID); err != nil {
		return err
	}
	if req.Limits != (sandbox.Limits{}) {
		// Better refused than silently ignored: see the package documentation.
		return errors.New("resource limits are not enforced by the local runtime yet")
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	if _, err := os.Lstat(r.dir(req.ID)); err == nil {
		return sandbox.ErrExists
	}
	layers, err := r.b.Layers(req.SnapshotID)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(r.tmpDir(), req.ID+"-")
	if err != nil {
		return err
	}
	defer func() { _ = removeAll(stage) }() // empty once renamed
	// Two overlays: usr (the layers' usr over the host /usr) and rest (the layer roots,
	// of which the other top-level directories are bound). The merged root of an overlay
	// takes its attributes from the upper directory, so upper/usr copies the layer's.
	info, err := os.Stat(filepath.Join(layers[0], "usr"))
	if err != nil {
		return fmt.Errorf("snapshot layer: %w", err)
	}
	for _, d := range []string{"upper/usr", "upper/rest", "mnt/usr", "mnt/rest"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(stage, "upper", "usr"), info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid)); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(stage, "upper", "rest"), 0o755); err != nil {
		return err
	}
	for _, d := range []string{"workspace", "run"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "lock"), nil, 0o600); err != nil {
		return err
	}
	sbInfo := sandbox.SandboxInfo{
		ID: req.ID, SnapshotID: req.SnapshotID, Status: sandbox.SandboxRunning,
		BlockNetwork: req.BlockNetwork, Env: req.Env, Created: time.Now().UTC(),
	}
	if err := writeInfo(stage, sbInfo); err != nil {
		return err
	}
	if err := os.Rename(stage, r.dir(req.ID)); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return sandbox.ErrExists
		}
		return err
	}
	return nil
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("invalid environment variable %q", k)
		}
	}
	return nil
}

func writeInfo(dir string, info sandbox.SandboxInfo) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, "state.json"), append(data, '\n'), 0o600)
}

func (r *Runtime) readInfo(id string) (sandbox.SandboxInfo, error) {
	var info sandbox.SandboxInfo
	if err := validID(id); err != nil {
		return info, err
	}
	data, err := os.ReadFile(filepath.Join(r.dir(id), "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("parse state of sandbox %s: %w", id, err)
	}
	return info, nil
}

// Get returns what is recorded about a sandbox.
func (r *Runtime) Get(_ context.Context, id string) (sandbox.SandboxInfo, error) {
	info, err := r.readInfo(id)
	if err != nil {
		return info, fmt.Errorf("local: %w", err)
	}
	return info, nil
}

// List returns every sandbox on the root, by id.
func (r *Runtime) List(_ context.Context) ([]sandbox.SandboxInfo, error) {
	entries, err := os.ReadDir(r.sandboxesDir())
	if err != nil {
		return nil, fmt.Errorf("local: list sandboxes: %w", err)
	}
	var out []sandbox.SandboxInfo
	for _, e := range entries {
		if info, err := r.readInfo(e.Name()); err == nil {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// lockSandbox takes the sandbox's flock (shared or exclusive) and returns its release.
func (r *Runtime) lockSandbox(id string, how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(r.dir(id), "lock"), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
