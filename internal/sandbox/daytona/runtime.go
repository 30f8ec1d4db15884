package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Labels every sandbox made by a Runtime carries, so List finds them (and only them) and
// orphans (sandboxes whose session is gone) can be swept.
const (
	LabelManaged = "trueforge.managed" // "true"
	LabelID      = "trueforge.id"      // the runtime's sandbox id (also the Daytona name)
)

// Runtime defaults.
const (
	// DefaultWorkDir is the contract's /workspace, the same path as on the local backend:
	// every snapshot the Builder makes ends with `WORKDIR /workspace` (WithWorkspace), which
	// the build creates owned by the image's user, whoever that is.
	DefaultWorkDir = sandbox.WorkspaceDir
	// DefaultAutoStop (minutes) stops an idle sandbox; Daytona counts only API and
	// toolbox activity, so a long background job is not activity.
	DefaultAutoStop = 15
	// DefaultAutoArchive (minutes) archives a sandbox stopped that long (Daytona's
	// default, 7 days).
	DefaultAutoArchive = 10080
	// DefaultAutoDelete is negative: never delete automatically; the harness deletes.
	DefaultAutoDelete = -1
	// DefaultMaxFileSize caps ReadFile when no max is given, and WriteFile.
	DefaultMaxFileSize = 64 << 20
)

// Runtime is a sandbox.Runtime on Daytona sandboxes through the Client. A sandbox's id is
// its Daytona name. Files live under WorkDir, which the contract's /workspace paths map
// to; commands run as the toolbox's session commands, with stdout and stderr apart and
// cancel reaching the sandbox (interactive.go).
//
// Limits must match the snapshot's resources, which Daytona enforces (the environment's cpu,
// memory and disk); other limits are refused, and so is Egress (a Daytona sandbox cannot
// reach a harness socket): network policy is
// BlockNetwork (networkBlockAll) and AllowDomains (domainAllowList), and secrets are
// Daytona secrets (CreateRequest.Secrets).
type Runtime struct {
	C *Client
	// WorkDir is the absolute directory that /workspace maps to (DefaultWorkDir).
	WorkDir string
	// AutoStop, AutoArchive and AutoDelete are the sandboxes' intervals in minutes, with
	// Daytona's meanings (autoStop 0 = never; autoArchive 0 = 30 days; autoDelete < 0 =
	// never, 0 = when stopped). nil means the Default* value. They stand in for the timings
	// a CreateRequest's Lifecycle leaves at zero (lifecycle.go).
	AutoStop, AutoArchive, AutoDelete *int
	// MaxFileSize caps ReadFile (when no max is given) and WriteFile (DefaultMaxFileSize).
	MaxFileSize int64
	// Labels are added to every sandbox, e.g. the control plane's name, so that two
	// control planes on one Daytona organization never list each other's sandboxes.
	Labels map[string]string

	mu    sync.Mutex
	cache map[string]*Sandbox // toolbox URLs by id; stable for a sandbox's life
	pool  sessionPool         // idle sessions for plain commands (sessionpool.go)
	// started holds the Daytona ids of the sandboxes this runtime made or started and
	// has not stopped since, by id (crash.go).
	started map[string]string
}

var _ sandbox.Runtime = (*Runtime)(nil)

// NewRuntime returns a Runtime on c with the defaults.
func NewRuntime(c *Client) *Runtime { return &Runtime{C: c} }

func (r *Runtime) workDir() string {
	if r.WorkDir != "" {
		return path.Clean(r.WorkDir)
	}
	return DefaultWorkDir
}

func (r *Runtime) maxFile() int64 {
	if r.MaxFileSize > 0 {
		return r.MaxFileSize
	}
	return DefaultMaxFileSize
}

func orDefault(p *int, d int) *int {
	if p != nil {
		v := *p
		return &v
	}
	return &d
}

// listLabels selects this runtime's sandboxes.
func (r *Runtime) listLabels() map[string]string {
	l := maps.Clone(r.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManaged] = "true"
	return l
}

// Create makes a started sandbox from a Ready (active) snapshot and its work directory.
func (r *Runtime) Create(ctx context.Context, req sandbox.CreateRequest) error {
	if err := r.create(ctx, req); err != nil {
		return fmt.Errorf("daytona: create sandbox %s: %w", req.ID, err)
	}
	return nil
}

func (r *Runtime) create(ctx context.Context, req sandbox.CreateRequest) error {
	switch {
	case req.ID == "":
		return errors.New("no sandbox id")
	case req.SnapshotID == "":
		return errors.New("no snapshot id")
	case req.Egress != nil:
		return errors.New("a harness egress proxy cannot be attached to a Daytona sandbox; use BlockNetwork, AllowDomains and Secrets")
	case len(req.AllowDomains) > MaxDomains:
		return fmt.Errorf("%d allowed domains; Daytona's domainAllowList takes at most %d", len(req.AllowDomains), MaxDomains)
	}
	if d, bad := badAllowedDomain(req.AllowDomains); bad { // domains.go
		return fmt.Errorf("allowed domain %q: Daytona's domainAllowList takes only dotted host names ending in a top-level domain of letters", d)
	}
	if err := r.checkLimits(ctx, req); err != nil {
		return err
	}
	labels, err := r.sandboxLabels(req.ID, req.Labels) // relabel.go
	if err != nil {
		return err
	}
	cr := CreateSandboxRequest{
		Name: req.ID, Snapshot: req.SnapshotID, Env: req.Env, Labels: labels,
		NetworkBlockAll: req.BlockNetwork,
	}
	if err := r.applySettings(&cr, req); err != nil { // intervals and CIDRs (lifecycle.go)
		return err
	}
	if !req.BlockNetwork && len(req.AllowDomains) > 0 {
		cr.DomainAllowList = strings.Join(req.AllowDomains, ",")
	}
	cr.Volumes = sandboxVolumes(req.Volumes, r.fromSandbox)
	cr.Target = r.snapshotTarget(ctx, req.SnapshotID) // regions.go
	envs := make([]string, 0, len(req.Secrets))
	for env := range req.Secrets {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		cr.Secrets = append(cr.Secrets, map[string]string{env: req.Secrets[env]})
	}
	sb, err := r.C.CreateSandbox(ctx, cr)
	if IsConflict(err) && !IsStateChangeInProgress(err) {
		// The name is taken: by a sandbox the caller may adopt (ErrExists), or by one an
		// earlier create left in error, which is removed and the create made again once.
		removed, cerr := r.clearFailed(ctx, req.ID)
		switch {
		case cerr != nil:
			return fmt.Errorf("%w; %w", err, cerr)
		case !removed:
			return fmt.Errorf("%w: %w", sandbox.ErrExists, err)
		}
		sb, err = r.C.CreateSandbox(ctx, cr)
		if IsConflict(err) && !IsStateChangeInProgress(err) {
			return fmt.Errorf("%w: %w", sandbox.ErrExists, err)
		}
	}
	if err != nil {
		// Daytona answers a sandbox that failed within its wait with 400 and no body, or
		// with the sandbox in error; either way, and after a timeout, the failed sandbox
		// keeps the name until it is deleted (failedcreate.go). A 404 names a missing
		// volume (or region), never the sandbox (createvolumes.go).
		return r.cleanupAfterFailedCreate(ctx, req.ID, createNotFound(err, req.Volumes))
	}
	if err := r.finishCreate(ctx, req.ID, sb); err != nil {
		// Half-made: remove it rather than leave a sandbox nobody will use.
		r.forget(req.ID)
		_ = r.C.DeleteSandbox(context.WithoutCancel(ctx), sb.ID)
		return err
	}
	return nil
}

// finishCreate waits for the new sandbox to start and makes its work directory.
func (r *Runtime) finishCreate(ctx context.Context, id string, sb *Sandbox) error {
	if sb.State != SandboxStarted {
		var err error
		if sb, err = r.C.WaitSandbox(ctx, sb.ID, SandboxStarted); err != nil {
			return err
		}
	}
	r.remember(id, sb)
	r.markStarted(id, sb.ID) // crash.go
	res, err := r.C.Execute(ctx, sb, ExecuteRequest{Command: "mkdir -p " + shellQuote(r.workDir())})
	if err != nil {
		return fmt.Errorf("creating the work directory: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("creating the work directory %s: exit %d: %s", r.workDir(), res.ExitCode, strings.TrimSpace(res.Result))
	}
	return nil
}

// checkLimits accepts limits that Daytona enforces anyway: a sandbox gets exactly its
// snapshot's cpu, memory and disk, so limits equal to those (or zero) hold, and anything
// else (or a pids limit, which Daytona has not) is refused rather than ignored.
func (r *Runtime) checkLimits(ctx context.Context, req sandbox.CreateRequest) error {
	l := req.Limits
	if l == (sandbox.Limits{}) {
		return nil
	}
	if l.Pids != 0 {
		return errors.New("daytona sandboxes have no process limit; leave Limits.Pids at 0")
	}
	snap, err := r.C.GetSnapshot(ctx, req.SnapshotID)
	if err != nil {
		return fmt.Errorf("reading snapshot %s for its resources: %w", req.SnapshotID, err)
	}
	if (l.CPU != 0 && l.CPU != snap.CPU) || (l.MemoryMB != 0 && l.MemoryMB != snap.Mem*1024) || (l.DiskMB != 0 && l.DiskMB != snap.Disk*1024) {
		return fmt.Errorf("limits cpu=%d memory=%d MB disk=%d MB differ from snapshot %s (cpu=%d memory=%d GB disk=%d GB): on Daytona a sandbox gets its snapshot's resources, set by the environment",
			l.CPU, l.MemoryMB, l.DiskMB, req.SnapshotID, snap.CPU, snap.Mem, snap.Disk)
	}
	return nil
}

func (r *Runtime) remember(id string, sb *Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cache == nil {
		r.cache = map[string]*Sandbox{}
	}
	r.cache[id] = sb
}

func (r *Runtime) forget(id string) {
	r.pool.drop(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, id)
	delete(r.started, id)
}

// sandbox returns the sandbox for toolbox calls: the cached object (its toolbox URL does
// not change), else a fresh GET.
func (r *Runtime) sandbox(ctx context.Context, id string) (*Sandbox, error) {
	r.mu.Lock()
	sb := r.cache[id]
	r.mu.Unlock()
	if sb != nil {
		return sb, nil
	}
	sb, err := r.C.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	r.remember(id, sb)
	return sb, nil
}

// toolboxErr turns the toolbox's "not running" answer into sandbox.ErrStopped and a
// vanished sandbox into sandbox.ErrLost.
func (r *Runtime) toolboxErr(ctx context.Context, id string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := asAPI(err); ok && (e.Status == 400 || e.Status == 404) {
		sb, gerr := r.C.GetSandbox(ctx, id)
		switch {
		case IsNotFound(gerr):
			r.forget(id)
			return fmt.Errorf("%w: %w", sandbox.ErrLost, err)
		case gerr == nil && lostState(sb.State):
			return fmt.Errorf("%w (Daytona reports %s: %s): %w", sandbox.ErrLost, sb.State, sb.ErrorReason, err)
		case gerr == nil && sb.State != SandboxStarted:
			return fmt.Errorf("%w (%s): %w", sandbox.ErrStopped, sb.State, err)
		}
	}
	return err
}

// inWork maps a contract path (relative to the workspace, or /workspace/...) to the
// sandbox's work directory; nothing outside it is reachable.
func (r *Runtime) inWork(p string) (string, error) {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return "", err
	}
	return path.Join(r.workDir(), rel), nil
}

// fromSandbox maps a path as commands see it to Daytona's: the workspace is WorkDir.
func (r *Runtime) fromSandbox(p string) string {
	if p == sandbox.WorkspaceDir || strings.HasPrefix(p, sandbox.WorkspaceDir+"/") {
		return path.Join(r.workDir(), strings.TrimPrefix(p, sandbox.WorkspaceDir))
	}
	return p
}

// Exec runs a command through the toolbox as a session command (interactive.go), so
// that cancel and timeout kill it in the sandbox and its output, stdout and stderr
// apart, streams to Stdout and Stderr in lines while it runs. A plain command's Stdin is
// uploaded to a temporary file in the work directory and redirected; an interactive
// one's is relayed as it is read. A sandbox this runtime started that Daytona reports
// stopped underneath it (its container died) is started again, files intact, before the
// command runs (crash.go).
func (r *Runtime) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if c, ok := req.Stdin.(io.Closer); ok && req.Interactive {
		defer c.Close() // releases the stdin forwarder and the caller's writer
	}
	res, err := r.exec(ctx, id, req)
	if err != nil {
		return res, fmt.Errorf("daytona: exec in sandbox %s: %w", id, err)
	}
	return res, nil
}

func (r *Runtime) exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res := sandbox.ExecResult{ExitCode: -1}
	argv, cwd, err := req.Invocation()
	if err != nil {
		return res, err
	}
	cwd = r.fromSandbox(cwd)
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return res, err
	}
	var stdin []byte // a plain command's, uploaded to a file
	if req.Stdin != nil && !req.Interactive {
		data, err := io.ReadAll(io.LimitReader(req.Stdin, r.maxFile()+1))
		if err != nil {
			return res, fmt.Errorf("reading stdin: %w", err)
		}
		if int64(len(data)) > r.maxFile() {
			return res, fmt.Errorf("stdin: %w", sandbox.ErrTooLarge)
		}
		stdin = data // not nil, even when empty (io.ReadAll)
	}
	res, err = r.run(ctx, id, sb, req, argv, cwd, stdin)
	if r.stoppedUnderneath(id, sb, err) { // crash.go
		if err := r.restartStopped(ctx, id, err); err != nil {
			return res, err
		}
		res, err = r.run(ctx, id, sb, req, argv, cwd, stdin)
	}
	return res, err
}

// run runs the command once: stdin (nil: none) is uploaded to a temporary file of the
// work directory, which is deleted after.
func (r *Runtime) run(ctx context.Context, id string, sb *Sandbox, req sandbox.ExecRequest, argv []string, cwd string, stdin []byte) (sandbox.ExecResult, error) {
	stdinFile := ""
	if stdin != nil {
		stdinFile = path.Join(r.workDir(), ".trueforge-stdin-"+randHex())
		if err := r.C.UploadFile(ctx, sb, stdinFile, stdin); err != nil {
			return sandbox.ExecResult{ExitCode: -1}, r.toolboxErr(ctx, id, err)
		}
		defer func() { _ = r.C.DeleteFile(context.WithoutCancel(ctx), sb, stdinFile, false) }()
	}
	return r.execSession(ctx, id, sb, req, argv, cwd, stdinFile)
}

// Stop stops the sandbox and waits until it is stopped, archived or gone (stoprace.go);
// its files stay unless Daytona deletes it on stop (autoDeleteInterval 0).
func (r *Runtime) Stop(ctx context.Context, id string) error {
	r.markStopped(id) // crash.go: an Exec now reports ErrStopped
	if err := r.stop(ctx, id); err != nil {
		return fmt.Errorf("daytona: stop sandbox %s: %w", id, err)
	}
	return nil
}

// Start starts a stopped or archived sandbox and waits for `started`.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if _, err := r.C.StartSandbox(ctx, id); err != nil {
		return fmt.Errorf("daytona: start sandbox %s: %w", id, r.lostErr(ctx, id, err))
	}
	sb, err := r.C.WaitSandbox(ctx, id, SandboxStarted)
	if err != nil {
		return fmt.Errorf("daytona: start sandbox %s: %w", id, r.lostErr(ctx, id, err))
	}
	r.markStarted(id, sb.ID) // crash.go
	return nil
}

// Archive stops the sandbox if needed, then archives it and waits for `archived`.
func (r *Runtime) Archive(ctx context.Context, id string) error {
	if err := r.Stop(ctx, id); err != nil {
		return err
	}
	if err := r.archive(ctx, id); err != nil {
		return fmt.Errorf("daytona: archive sandbox %s: %w", id, err)
	}
	return nil
}

// Delete deletes the sandbox; a missing one is fine. Daytona frees the name at once.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	r.forget(id)
	if err := r.C.DeleteSandbox(ctx, id); err != nil && !IsNotFound(err) {
		return fmt.Errorf("daytona: delete sandbox %s: %w", id, err)
	}
	return nil
}

// Get describes the sandbox. One in Daytona's error or build_failed state is ErrLost.
func (r *Runtime) Get(ctx context.Context, id string) (sandbox.SandboxInfo, error) {
	sb, err := r.C.GetSandbox(ctx, id)
	if err != nil {
		return sandbox.SandboxInfo{}, fmt.Errorf("daytona: sandbox %s: %w", id, err)
	}
	info, err := r.info(sb)
	if err != nil {
		return info, fmt.Errorf("daytona: sandbox %s: %w", id, err)
	}
	return info, nil
}

// List returns this runtime's sandboxes (by label), one per id, sorted by id, error
// states included (with their status as Daytona reports it) so that they can be swept.
// Sandboxes being deleted, which Daytona lists for a while, are left out (listing.go). Env
// is empty: Daytona's list items carry none (Get has it).
func (r *Runtime) List(ctx context.Context) ([]sandbox.SandboxInfo, error) {
	all, err := r.C.AllSandboxes(ctx, SandboxListOptions{Labels: r.listLabels(), Limit: 200})
	if err != nil {
		return nil, fmt.Errorf("daytona: list sandboxes: %w", err)
	}
	out := listed(all, r.info)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (r *Runtime) info(sb *Sandbox) (sandbox.SandboxInfo, error) {
	labels := maps.Clone(sb.Labels)
	id := sb.Name
	if v := labels[LabelID]; v != "" {
		id = v
	}
	delete(labels, LabelID)
	delete(labels, LabelManaged)
	for k := range r.Labels {
		delete(labels, k)
	}
	if len(labels) == 0 {
		labels = nil
	}
	info := sandbox.SandboxInfo{ID: id, SnapshotID: sb.Snapshot, BlockNetwork: sb.NetworkBlockAll,
		Env: sb.Env, Labels: labels, Status: sb.State}
	if len(info.Env) == 0 {
		info.Env = nil
	}
	if sb.CreatedAt != nil {
		info.Created = *sb.CreatedAt
	}
	switch sb.State {
	case SandboxStarted, "starting", "creating", "restoring", "pulling_snapshot", "resuming":
		info.Status = sandbox.SandboxRunning
	case SandboxStopped, "stopping":
		info.Status = sandbox.SandboxStopped
	case SandboxArchived, "archiving":
		info.Status = sandbox.SandboxArchived
	case SandboxError, SandboxBuildFailed, SandboxDestroyed, SandboxDestroying:
		return info, fmt.Errorf("%w: Daytona reports %s: %s", sandbox.ErrLost, sb.State, sb.ErrorReason)
	}
	return info, nil
}

// WriteFile uploads r's content to p (parents created), then sets mode (0: 0644), except
// in a volume, where modes are fixed (setMode, filemodes.go).
func (r *Runtime) WriteFile(ctx context.Context, id, p string, src io.Reader, mode fs.FileMode) error {
	if err := r.writeFile(ctx, id, p, src, mode); err != nil {
		return fmt.Errorf("daytona: write %s in sandbox %s: %w", p, id, err)
	}
	return nil
}

func (r *Runtime) writeFile(ctx context.Context, id, p string, src io.Reader, mode fs.FileMode) error {
	dst, err := r.inWork(p)
	if err != nil {
		return err
	}
	if dst == r.workDir() {
		return errors.New("the workspace itself is not a file")
	}
	data, err := io.ReadAll(io.LimitReader(src, r.maxFile()+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > r.maxFile() {
		return sandbox.ErrTooLarge
	}
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return err
	}
	if err := r.C.UploadFile(ctx, sb, dst, data); err != nil {
		return r.toolboxErr(ctx, id, err)
	}
	return r.setMode(ctx, id, sb, dst, mode)
}

// ReadFile downloads a regular file; past maxBytes (0: MaxFileSize) it is ErrTooLarge,
// decided from the file's size before downloading.
func (r *Runtime) ReadFile(ctx context.Context, id, p string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = r.maxFile()
	}
	fi, err := r.StatFile(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if fi.Mode.IsDir() {
		return nil, fmt.Errorf("daytona: read %s in sandbox %s: is a directory", p, id)
	}
	if fi.Size > maxBytes {
		return nil, fmt.Errorf("daytona: read %s in sandbox %s (%d bytes): %w", p, id, fi.Size, sandbox.ErrTooLarge)
	}
	dst, _ := r.inWork(p)
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err := r.C.DownloadFile(ctx, sb, dst)
	if err != nil {
		return nil, fmt.Errorf("daytona: read %s in sandbox %s: %w", p, id, r.toolboxErr(ctx, id, err))
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("daytona: read %s in sandbox %s: %w", p, id, sandbox.ErrTooLarge)
	}
	return b, nil
}

// StatFile describes one entry of the workspace.
func (r *Runtime) StatFile(ctx context.Context, id, p string) (sandbox.FileInfo, error) {
	dst, err := r.inWork(p)
	if err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("daytona: stat %s in sandbox %s: %w", p, id, err)
	}
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("daytona: stat %s in sandbox %s: %w", p, id, err)
	}
	fi, err := r.C.StatFile(ctx, sb, dst)
	if err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("daytona: stat %s in sandbox %s: %w", p, id, r.toolboxErr(ctx, id, err))
	}
	return r.fileInfo(dst, fi), nil
}

// ListFiles lists a workspace directory: its first entries by path, at most
// sandbox.ListLimit(limit). The toolbox answers the whole directory at once (no paging),
// so the cut is made here (sandbox.CutList); a directory whose answer passes the
// client's response cap (64 MiB, some 300,000 entries) is an error wrapping
// sandbox.ErrTooLarge.
func (r *Runtime) ListFiles(ctx context.Context, id, dir string, limit int) (sandbox.FileList, error) {
	dst, err := r.inWork(dir)
	if err != nil {
		return sandbox.FileList{}, fmt.Errorf("daytona: list %s in sandbox %s: %w", dir, id, err)
	}
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return sandbox.FileList{}, fmt.Errorf("daytona: list %s in sandbox %s: %w", dir, id, err)
	}
	fis, err := r.C.ListFiles(ctx, sb, dst)
	if err != nil {
		return sandbox.FileList{}, fmt.Errorf("daytona: list %s in sandbox %s: %w", dir, id, r.toolboxErr(ctx, id, err))
	}
	out := make([]sandbox.FileInfo, 0, len(fis))
	for i := range fis {
		out = append(out, r.fileInfo(path.Join(dst, fis[i].Name), &fis[i]))
	}
	return sandbox.CutList(out, limit), nil
}

// DeleteFile removes a file or directory tree of the workspace (never the workspace).
func (r *Runtime) DeleteFile(ctx context.Context, id, p string) error {
	dst, err := r.inWork(p)
	if err != nil {
		return fmt.Errorf("daytona: delete %s in sandbox %s: %w", p, id, err)
	}
	if dst == r.workDir() {
		return fmt.Errorf("daytona: delete %s in sandbox %s: refusing to delete the workspace", p, id)
	}
	sb, err := r.sandbox(ctx, id)
	if err != nil {
		return fmt.Errorf("daytona: delete %s in sandbox %s: %w", p, id, err)
	}
	if err := r.C.DeleteFile(ctx, sb, dst, true); err != nil {
		return fmt.Errorf("daytona: delete %s in sandbox %s: %w", p, id, r.toolboxErr(ctx, id, err))
	}
	return nil
}

// fileInfo converts a toolbox FileInfo at absolute sandbox path abs.
func (r *Runtime) fileInfo(abs string, fi *FileInfo) sandbox.FileInfo {
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, r.workDir()), "/")
	if rel == "" {
		rel = "."
	}
	mode := fs.FileMode(0o644)
	if n, err := strconv.ParseUint(strings.TrimPrefix(fi.Permissions, "0"), 8, 32); err == nil {
		mode = fs.FileMode(n).Perm()
	}
	if fi.IsDir {
		mode |= fs.ModeDir
	}
	mt, _ := time.Parse(time.RFC3339Nano, fi.ModifiedAt)
	return sandbox.FileInfo{Path: rel, Size: fi.Size, Mode: mode, ModTime: mt}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func randHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
