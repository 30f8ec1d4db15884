package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// Sandbox statuses, as reported by Runtime.Get.
const (
	SandboxRunning = "Running" // accepts Exec
	SandboxStopped = "Stopped" // no process; files kept; Start makes it Running again
	// SandboxArchived: no process, files packed into the runtime's archive store and the
	// working directory freed; Start restores the files and makes it Running again.
	SandboxArchived = "Archived"
)

// Limit names carried by ExecResult.Limit when a command ended because it hit one.
const (
	LimitMemory  = "memory"
	LimitPids    = "pids"
	LimitCPUTime = "cpu_time"
	LimitDisk    = "disk"
	LimitTimeout = "timeout"
)

// DefaultOutputCap is how many bytes of each of stdout and stderr an Exec retains when
// ExecRequest.OutputCap is 0.
const DefaultOutputCap = 1 << 20

// Errors returned (wrapped) by a Runtime besides ErrNotFound.
var (
	ErrStopped  = errors.New("sandbox is stopped")
	ErrExists   = errors.New("already exists")
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular: a file call found no regular file at the path but a symlink (never
	// followed), a directory, a FIFO or a device, possibly swapped in while the call was
	// opening it. It is the caller's request that fails, not the runtime.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutsideWorkspace: a file call named an absolute path outside WorkspaceDir,
	// which file operations never reach (WorkspacePath).
	ErrOutsideWorkspace = errors.New("outside " + WorkspaceDir)
	// ErrLost: the sandbox vanished or its processes died underneath a call (crash,
	// out-of-band delete). The caller may recreate it; files may be gone.
	ErrLost = errors.New("sandbox lost")
)

// Limits are the resources a sandbox may use. Zero means no limit.
type Limits struct {
	CPU      int64 // CPUs
	MemoryMB int64
	Pids     int64
	DiskMB   int64
}

// UnenforcedLimit is a limit that a runtime runs a sandbox without, or enforces only in
// part (per process, per file), because the host does not let it do better.
type UnenforcedLimit struct {
	// Limit is "cpu", "memory", "pids", "disk" or "volume" (a volume's size).
	Limit string `json:"limit"`
	// Reason says why, and what is enforced instead if anything.
	Reason string `json:"reason"`
}

func (u UnenforcedLimit) String() string { return u.Limit + ": " + u.Reason }

// LimitReporter is implemented by runtimes that may run a sandbox with only some of its
// Limits enforced (the local runtime without a writable cgroup), as rootless container
// engines do. UnenforcedLimits lists those of lim that a sandbox created now would not
// get; nil means all are enforced. A runtime told to require its limits refuses such a
// sandbox at Create instead.
type LimitReporter interface {
	UnenforcedLimits(lim Limits) []UnenforcedLimit
}

// CreateRequest asks a Runtime for a new sandbox on a Ready snapshot.
type CreateRequest struct {
	ID         string
	SnapshotID string
	// Env is set in every command of the sandbox (ExecRequest.Env wins).
	Env map[string]string
	// BlockNetwork leaves the sandbox with no network interface but lo.
	BlockNetwork bool
	Limits       Limits
	// Labels tie the sandbox to its owner (session, agent); List reports them so
	// orphans can be found and swept.
	Labels map[string]string
	// Egress, when set, replaces the sandbox's network: no interface but lo, and a
	// harness-side proxy reached through a unix socket is the only way out.
	Egress *Egress
	// AllowDomains, for backends that enforce egress themselves (Daytona's
	// domainAllowList), are the only hosts the sandbox may reach; empty means any.
	// BlockNetwork wins over it.
	AllowDomains []string
	// Secrets, for backends with their own secret store (Daytona), maps an environment
	// variable to the backend secret whose placeholder it carries.
	Secrets map[string]string
	// AllowCIDRs are address ranges the sandbox may reach besides AllowDomains (Daytona's
	// networkAllowList; the egress proxy enforces them for the local backend).
	AllowCIDRs []string
	// Volumes are mounted into the sandbox (VolumeMount).
	Volumes []VolumeMount
	// Lifecycle, for backends that stop, archive and delete idle sandboxes themselves
	// (Daytona's intervals), are the agent's timings; zero values mean the backend's
	// defaults. The harness's reaper enforces the same timings as a second line.
	Lifecycle Lifecycle
}

// ReservedLabelPrefix starts the labels trueforge sets on sandboxes itself: the harness's
// (session, agent, owner, environment) and the backends' (managed, id, plane). An
// environment's labels may not use it (ReservedLabel): the provider refuses them at plan,
// and the harness drops them, so no row can relabel a sandbox as another session's.
const ReservedLabelPrefix = "trueforge."

// ReservedLabel reports whether label key k is trueforge's own, in any letter case.
func ReservedLabel(k string) bool {
	return len(k) >= len(ReservedLabelPrefix) && strings.EqualFold(k[:len(ReservedLabelPrefix)], ReservedLabelPrefix)
}

// VolumeMount mounts a volume (a trueforge_volume) into a sandbox.
type VolumeMount struct {
	// Volume is the backend's id of the volume (Daytona's volume id; the local
	// backend's directory under its data dir).
	Volume string
	// MountPath is the absolute path inside the sandbox.
	MountPath string
	// Subpath, when set, mounts only that folder of the volume.
	Subpath string
}

// Lifecycle are an idle sandbox's timings: stopped after IdleStop without activity,
// archived ArchiveAfter once stopped, deleted DeleteAfter once stopped. Zero means the
// backend's default; a negative DeleteAfter means never.
type Lifecycle struct {
	IdleStop     time.Duration
	ArchiveAfter time.Duration
	DeleteAfter  time.Duration
	// DeleteOnStop: the sandbox is deleted when it stops, files and all (Daytona requires
	// it of GPU sandboxes). The next call that needs a sandbox gets a new one.
	DeleteOnStop bool
}

// Egress routes a sandbox's network through a harness-side proxy.
type Egress struct {
	// Socket is a unix socket on the host, named EgressSocketName and alone in a
	// directory of its own (owned by the runtime's user, not writable by group or others).
	// The directory, not the socket, is bound read-only at EgressSocketDir, so the socket
	// is at EgressSocketPath inside, and a harness that listens anew at the same path (a
	// new process) is reached by running sandboxes: only the directory must keep its
	// inode while they run.
	Socket string
	// Helper is a static executable on the host, bound read-only at EgressHelperPath and
	// started inside the sandbox's network namespace (as the sandbox user) whenever the
	// sandbox runs. It listens on loopback and forwards to the socket, and closes the
	// descriptor named by EgressReadyEnv once it listens.
	Helper string
	// Files are written read-only into the sandbox under /run/trueforge (for example the
	// per-sandbox CA bundle), keyed by base name.
	Files map[string][]byte
}

// Fixed paths inside a sandbox for the egress plumbing: egress/wire's, the one place both
// ends of the egress path and the runtimes read them from.
const (
	// EgressSocketDir is where the directory of Egress.Socket is bound (read-only).
	EgressSocketDir = wire.SocketDir
	// EgressSocketName is the base name Egress.Socket must have on the host.
	EgressSocketName = wire.SocketName
	// EgressSocketPath is the harness's socket as the sandbox sees it.
	EgressSocketPath = wire.SocketPath
	// EgressHelperPath is where Egress.Helper is bound.
	EgressHelperPath = wire.HelperPath
	// EgressReadyEnv, in the helper's environment, names a descriptor the helper closes
	// once it listens (wire.ReadyEnv).
	EgressReadyEnv = wire.ReadyEnv
)

// ExecRequest is one command in a sandbox. Exactly one of Argv and Shell is set; Shell
// runs with /bin/sh -c.
type ExecRequest struct {
	Argv  []string
	Shell string
	Cwd   string // default: the workspace
	Env   map[string]string
	Stdin io.Reader
	// Timeout bounds the command's wall-clock time; 0 means none beyond ctx.
	Timeout time.Duration
	// OutputCap is how many bytes of each stream are retained (head and tail); 0 means
	// DefaultOutputCap.
	OutputCap int
	// Stdout and Stderr, when set, receive the streams as they are produced (in
	// addition to the retained copy in ExecResult). They must not block for long.
	Stdout, Stderr io.Writer
	// Interactive is for a caller that talks to the command while it runs (Code Mode
	// answering a script's requests): Stdin is read while the command runs (it may be a
	// live pipe that reaches EOF only when the caller closes it) and each chunk read
	// reaches the command as it arrives, without waiting for more; Stdout and Stderr get
	// output as it is produced, each within a bounded latency that the backend documents;
	// cancelling ctx stops the command's processes in the sandbox before Exec returns
	// (ExitCode -1 and ctx's error). Before returning, Exec closes Stdin if it is an
	// io.Closer, so a writer blocked on an io.Pipe after the command ended gets
	// io.ErrClosedPipe instead of waiting forever. A backend may deliver output in whole
	// lines (Daytona: see its package).
	Interactive bool
}

// ExecResult is what a finished command left.
type ExecResult struct {
	// ExitCode is the command's status; 124 after a timeout, -1 when it was killed
	// otherwise (cancel, Stop).
	ExitCode       int
	Stdout, Stderr []byte
	// Truncated: some output was dropped from the middle of a stream.
	Truncated bool
	TimedOut  bool
	// Limit names the limit that ended the command (Limit* constants), or "".
	Limit    string
	Duration time.Duration
}

// SandboxInfo is a sandbox as recorded by its Runtime. Env is the environment it was
// created with, as Get reports it; List may leave it empty (Daytona's list items carry no
// env).
type SandboxInfo struct {
	ID           string            `json:"id"`
	SnapshotID   string            `json:"snapshot_id"`
	Status       string            `json:"status"`
	BlockNetwork bool              `json:"block_network,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Limits       Limits            `json:"limits"`
	Created      time.Time         `json:"created"`
}

// FileInfo describes an entry of a sandbox's workspace.
type FileInfo struct {
	Path    string // relative to the workspace, slash-separated
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

// FileType names the type of a file as the file calls and their callers say it: file,
// dir, symlink, fifo, socket, device or other.
func FileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

// Runtime runs sandboxes. File paths are inside the sandbox's workspace, given either
// relative to it or as /workspace/...; nothing outside it is reachable through them.
type Runtime interface {
	Create(ctx context.Context, req CreateRequest) error
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)
	// Stop kills every process of the sandbox and keeps its files.
	Stop(ctx context.Context, id string) error
	// Start makes a Stopped or Archived sandbox Running again, files intact.
	Start(ctx context.Context, id string) error
	// Archive stops a sandbox and packs its files away, freeing its working directory.
	Archive(ctx context.Context, id string) error
	// Delete stops a sandbox and removes everything it had. A missing sandbox is fine.
	Delete(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (SandboxInfo, error)
	List(ctx context.Context) ([]SandboxInfo, error)

	// WriteFile creates or replaces a file of the workspace. A new file gets mode (0 means
	// 0644); replacing one keeps its mode unless a mode other than 0644 is given, as
	// `cat > file` does, so a rewrite never drops an executable bit by default.
	WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error
	// ReadFile returns a regular file's content; ErrTooLarge past maxBytes (0: a default).
	ReadFile(ctx context.Context, id, path string, maxBytes int64) ([]byte, error)
	StatFile(ctx context.Context, id, path string) (FileInfo, error)
	// ListFiles lists a directory (not recursively, no symlink followed): its first
	// entries by path, at most limit of them (0: DefaultListEntries), and how many it
	// left out (FileList; filelist.go has the bounds).
	ListFiles(ctx context.Context, id, dir string, limit int) (FileList, error)
	DeleteFile(ctx context.Context, id, path string) error
}
