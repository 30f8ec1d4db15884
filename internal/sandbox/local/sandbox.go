//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Runtime runs sandboxes on snapshots of a Builder. It implements sandbox.Runtime.
//
// On-disk layout under the runtime root (created 0700):
//
//	sandboxes/<id>/         one directory per sandbox; it appears atomically (made in tmp/)
//	  state.json            the sandbox's record: sandbox.SandboxInfo and its egress hook
//	  lock                  flock: shared while an Exec starts, exclusive for Stop/Start/
//	                        Archive/Delete
//	  keeper.lock           flock: held while a keeper is being started
//	  disk.img              (DiskMB, as root) ext4 image mounted on data/
//	  data/                 everything the sandbox keeps (on the image when there is one):
//	    upper/usr/          upper directory of the usr overlay (layers' usr over host /usr)
//	    upper/rest/         upper directory of the overlay of the layer roots, of which
//	                        the other TopDirs are bound
//	    work/usr, work/rest overlay workdirs, emptied at each keeper start
//	    workspace/          bound read-write at /workspace
//	  mnt/usr, mnt/rest     mount points; the overlays exist only in the keeper's namespace
//	  egress/               files of the egress hook, bound read-only under /run/trueforge
//	                        (the socket's directory is the harness's, bound as it is)
//	  run/                  the running keeper: keeper ("<pid> <start time>"), ctl.sock
//	                        (the init's control socket), keeper.log (setup errors)
//	archives/<id>.tar.gz    data/ of an Archived sandbox
//	tmp/                    staging and trash
//
// Like the Builder, a Runtime keeps nothing in memory that another process needs:
// another Runtime on the same root (a restarted harness) finds the sandboxes, execs in
// them (starting their keeper again if it died with its owner) and can stop them. The
// only in-memory state is the write end of each keeper's lifeline pipe.
type Runtime struct {
	// MaxFileSize caps ReadFile (when no max is given) and WriteFile; 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
	// KillWait bounds how long Stop and a timed-out Exec wait for the sandbox's processes
	// to disappear after SIGKILL; 0 means 10 s.
	KillWait time.Duration
	// Spares is how many keeper processes the runtime keeps started ahead, each taken
	// by the next sandbox (re)started and replaced in the background once that sandbox
	// answers (spare.go); 0 means DefaultSpares, a negative number none. They are
	// started once the first sandbox has started.
	Spares int

	b       *Builder
	root    string
	bwrap   string
	unshare string
	sleep   string // the user namespaces' holder (setup.go)
	exe     string // this program, run as each sandbox's init
	// initArgv, when set, is what bwrap runs instead of the init (bwrapArgs): only
	// BenchmarkBwrapSandboxFloor sets it, to run true where the init would run.
	initArgv []string
	limits   *limiter

	mu        sync.Mutex
	lifelines map[string]*os.File // sandbox id -> write end of its keeper's lifeline

	spareMu sync.Mutex
	spares  []*spare // keeper processes started ahead (spare.go)
	filling bool     // a goroutine is starting spares
}

// record is what state.json holds about a sandbox.
type record struct {
	sandbox.SandboxInfo
	Egress *sandbox.Egress `json:"egress,omitempty"`
	// IDs is the sandbox's id slot on a root runtime (subids.go): its files on the host
	// belong to the slot's ids. Nil unprivileged, and while the sandbox is archived.
	IDs *idRange `json:"ids,omitempty"`
	// Volumes are the sandbox's volume mounts (volumes.go).
	Volumes []volumeBind `json:"volumes,omitempty"`
}

// DefaultMaxFileSize is the file size cap of ReadFile and WriteFile.
const DefaultMaxFileSize = 64 << 20

// Sandbox user and group inside: unprivileged, owning /workspace.
const (
	sandboxUID  = "1000"
	sandboxUIDn = 1000
)

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
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("local: find this program (it runs as the sandbox init): %w", err)
	}
	r := &Runtime{b: b, root: abs, exe: exe, lifelines: map[string]*os.File{}}
	for _, t := range []struct {
		dst  *string
		name string
	}{{&r.bwrap, "bwrap"}, {&r.unshare, "unshare"}, {&r.sleep, "sleep"}} {
		if *t.dst, err = findTool(t.name); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{r.root, r.sandboxesDir(), r.tmpDir(), r.archivesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("local: create runtime directory %s: %w", d, err)
		}
	}
	r.limits = newLimiter(r.root)
	if err := r.Sweep(context.Background()); err != nil {
		return nil, fmt.Errorf("local: sweep runtime root: %w", err)
	}
	return r, nil
}

func (r *Runtime) sandboxesDir() string     { return filepath.Join(r.root, "sandboxes") }
func (r *Runtime) tmpDir() string           { return filepath.Join(r.root, "tmp") }
func (r *Runtime) dir(id string) string     { return filepath.Join(r.sandboxesDir(), id) }
func (r *Runtime) dataDir(id string) string { return filepath.Join(r.dir(id), "data") }
func (r *Runtime) wsDir(id string) string   { return filepath.Join(r.dataDir(id), "workspace") }
func (r *Runtime) runDir(id string) string  { return filepath.Join(r.dir(id), "run") }
func (r *Runtime) archivesDir() string      { return filepath.Join(r.root, "archives") }
func (r *Runtime) archivePath(id string) string {
	return filepath.Join(r.archivesDir(), id+".tar.gz")
}

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
	rec, err := r.createStopped(ctx, req)
	if err != nil {
		return err
	}
	// Running means a keeper: start it now and wait until its init answers, so that the
	// first Exec finds it and a sandbox that cannot run is not left behind.
	if err := r.startAndPing(ctx, req.ID, rec); err != nil {
		_ = r.Delete(context.Background(), req.ID)
		return err
	}
	return nil
}

// createStopped makes the sandbox's directory and record, without its keeper: the part
// of create before anything runs (BenchmarkBwrapSandboxFloor starts the keeper itself).
func (r *Runtime) createStopped(ctx context.Context, req sandbox.CreateRequest) (record, error) {
	if err := validID(req.ID); err != nil {
		return record{}, err
	}
	if err := checkEnv(req.Env); err != nil {
		return record{}, err
	}
	if err := checkLabels(req.Labels); err != nil {
		return record{}, err
	}
	if err := r.limits.check(req.Limits); err != nil {
		return record{}, err
	}
	if err := checkEgress(req.Egress); err != nil {
		return record{}, err
	}
	vols, err := r.resolveVolumes(ctx, req.Volumes)
	if err != nil {
		return record{}, err
	}
	if _, err := os.Lstat(r.dir(req.ID)); err == nil {
		return record{}, sandbox.ErrExists
	}
	layers, err := r.b.Layers(req.SnapshotID)
	if err != nil {
		return record{}, err
	}
	if err := ctx.Err(); err != nil {
		return record{}, err
	}
	stage, err := os.MkdirTemp(r.tmpDir(), req.ID+"-")
	if err != nil {
		return record{}, err
	}
	staged := true
	defer func() {
		if staged {
			_ = r.unmountData(stage)
			_ = removeAll(stage)
		}
	}()
	for _, d := range []string{"mnt/usr", "mnt/rest", "data"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o700); err != nil {
			return record{}, err
		}
	}
	for _, d := range []string{"run", "egress"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o700); err != nil {
			return record{}, err
		}
	}
	for _, f := range []string{"lock", "keeper.lock"} {
		if err := os.WriteFile(filepath.Join(stage, f), nil, 0o600); err != nil {
			return record{}, err
		}
	}
	if req.Limits.DiskMB > 0 && r.limits.diskImage {
		if err := makeDiskImage(ctx, filepath.Join(stage, "disk.img"), filepath.Join(stage, "data"), req.Limits.DiskMB); err != nil {
			return record{}, fmt.Errorf("limits.disk_mb: %w", err)
		}
	}
	var ids *idRange
	if r.b.ids != nil {
		slot, err := r.b.ids.claim(r.dir(req.ID))
		if err != nil {
			return record{}, err
		}
		ids = &slot
		defer func() {
			if staged {
				r.b.ids.release(slot, r.dir(req.ID))
			}
		}()
	}
	if err := initData(filepath.Join(stage, "data"), layers[0], ids); err != nil {
		return record{}, err
	}
	rec := record{IDs: ids, SandboxInfo: sandbox.SandboxInfo{
		ID: req.ID, SnapshotID: req.SnapshotID, Status: sandbox.SandboxRunning,
		BlockNetwork: req.BlockNetwork || req.Egress != nil, Env: req.Env, Labels: req.Labels,
		Limits: req.Limits, Created: time.Now().UTC(),
	}, Egress: req.Egress, Volumes: vols}
	if err := writeRecord(stage, rec); err != nil {
		return record{}, err
	}
	// The image stays mounted across the rename: a mount point moves with its directory.
	if err := os.Rename(stage, r.dir(req.ID)); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return record{}, sandbox.ErrExists
		}
		return record{}, err
	}
	staged = false
	return rec, nil
}

// startAndPing starts the sandbox's keeper if none runs and waits for its init.
func (r *Runtime) startAndPing(ctx context.Context, id string, rec record) error {
	c, err := r.connect(ctx, id, rec)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(keeperStartWait))
	}
	var rep initReply
	err = writeFrame(c, execRequest{Ping: true}, nil)
	if err == nil {
		_, err = readFrame(c, &rep, 0)
	}
	if err != nil {
		return fmt.Errorf("the sandbox did not start: %v; %s", err, r.keeperLogTail(id))
	}
	// Up: now a keeper for the next sandbox may start (spare.go).
	r.refillSpares()
	return nil
}

// initData makes the directories of a sandbox's data/: the overlay upper directories
// (the merged root of an overlay takes its attributes from the upper directory, so
// upper/usr copies the layer's), owned by the slot's root, and the workspace, owned by
// the sandbox user (ids nil: by this user, whom both map to).
func initData(data, topLayer string, ids *idRange) error {
	info, err := os.Stat(filepath.Join(topLayer, "usr"))
	if err != nil {
		return fmt.Errorf("snapshot layer: %w", err)
	}
	for _, d := range []string{"upper/usr", "upper/rest", "work", "tmp"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(data, "upper", "usr"), info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid)); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(data, "upper", "rest"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(data, "workspace"), 0o755); err != nil {
		return err
	}
	if ids == nil {
		return nil
	}
	for _, d := range []string{"upper/usr", "upper/rest"} {
		if err := os.Lchown(filepath.Join(data, d), int(ids.UID), int(ids.GID)); err != nil {
			return err
		}
	}
	return os.Lchown(filepath.Join(data, "workspace"), int(ids.hostUID(sandboxUIDn)), int(ids.hostGID(sandboxUIDn)))
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("invalid environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	return nil
}

// checkLabels accepts labels with printable keys of at most 128 bytes and values of at
// most 1024, 64 labels at most.
func checkLabels(labels map[string]string) error {
	if len(labels) > 64 {
		return fmt.Errorf("labels: %d given, at most 64 are allowed", len(labels))
	}
	for k, v := range labels {
		if k == "" || len(k) > 128 || len(v) > 1024 || strings.ContainsFunc(k+v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return fmt.Errorf("label %q: keys must be 1 to 128 bytes and values at most 1024, without control characters", k)
		}
	}
	return nil
}

func writeRecord(dir string, rec record) error {
	return writeJSONFile(filepath.Join(dir, "state.json"), rec)
}

func (r *Runtime) readRecord(id string) (record, error) {
	if err := validID(id); err != nil {
		return record{}, err
	}
	return readJSONFile[record](filepath.Join(r.dir(id), "state.json"), "state", "sandbox "+id)
}

// Get returns what is recorded about a sandbox.
func (r *Runtime) Get(_ context.Context, id string) (sandbox.SandboxInfo, error) {
	rec, err := r.readRecord(id)
	if err != nil {
		return rec.SandboxInfo, fmt.Errorf("local: %w", err)
	}
	return rec.SandboxInfo, nil
}

// List returns every sandbox on the root, by id.
func (r *Runtime) List(_ context.Context) ([]sandbox.SandboxInfo, error) {
	entries, err := os.ReadDir(r.sandboxesDir())
	if err != nil {
		return nil, fmt.Errorf("local: list sandboxes: %w", err)
	}
	var out []sandbox.SandboxInfo
	for _, e := range entries {
		if rec, err := r.readRecord(e.Name()); err == nil {
			out = append(out, rec.SandboxInfo)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// lockSandbox takes the sandbox's flock (shared or exclusive) and returns its release.
func (r *Runtime) lockSandbox(id string, how int) (func(), error) {
	return r.lockFile(filepath.Join(r.dir(id), "lock"), how)
}

func (r *Runtime) lockFile(path string, how int) (func(), error) {
	id := filepath.Base(filepath.Dir(path))
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
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
