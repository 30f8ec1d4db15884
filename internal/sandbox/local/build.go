package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// StartBuild starts baking snapshot req.ID on top of req.Base (the release or another
// ready snapshot) and returns once the build runs. The build runs in its own session,
// detached from the caller, so it keeps running when the caller's context is cancelled
// or the caller exits; BuildState reports on it from any process.
//
// A snapshot that is already building or ready on the same base is left alone (builds are
// content-addressed, so it is the same build); a failed one is removed and rebuilt.
func (b *Builder) StartBuild(ctx context.Context, req sandbox.BuildRequest) error {
	if err := b.startBuild(ctx, req); err != nil {
		return fmt.Errorf("local: start build of %s: %w", req.ID, err)
	}
	return nil
}

func (b *Builder) startBuild(ctx context.Context, req sandbox.BuildRequest) error {
	if err := validID(req.ID); err != nil {
		return err
	}
	if req.Base == "" {
		return errors.New("no base snapshot given")
	}
	if img := req.Spec.Image; img != "" && img != sandbox.PlatformImage {
		return fmt.Errorf("image %q is not available locally: the local backend builds only on the %q image", img, sandbox.PlatformImage)
	}
	if err := checkBuildSpec(req.Spec); err != nil { // dockerfile.go
		return err
	}
	if req.Spec.DiskGB < 0 {
		return fmt.Errorf("disk limit %d GiB is negative", req.Spec.DiskGB)
	}
	if !buildsSupported {
		return errors.New("local builds need Linux (user namespaces, overlayfs and bubblewrap)")
	}
	if done, err := b.reuseExisting(ctx, req); done || err != nil {
		return err
	}
	lowers, err := b.chain(req.Base)
	if err != nil {
		return fmt.Errorf("base: %w", err)
	}
	if len(lowers)+1 > MaxLayerDepth {
		return fmt.Errorf("stacking on %s would exceed %d layers", req.Base, MaxLayerDepth)
	}
	if err := checkOverlayPath(b.hostUsr); err != nil {
		return err
	}
	plan := buildPlan{
		id:           req.ID,
		snapshotsDir: b.snapshotsDir(),
		lowerIDs:     lowers,
		hostUsr:      b.hostUsr,
		rootLinks:    hostRootLinks(b.hostRoot),
		blockNetwork: req.BlockNetwork,
		timeout:      b.timeout(),
		diskGB:       req.Spec.DiskGB,
	}
	if err := b.planEgress(&plan, req); err != nil {
		return err
	}
	for _, t := range []struct {
		dst  *string
		name string
	}{{&plan.bwrap, "bwrap"}, {&plan.unshare, "unshare"}, {&plan.timeoutBin, "timeout"}, {&plan.sleep, "sleep"}} {
		if *t.dst, err = findTool(t.name); err != nil {
			return err
		}
	}
	plan.exe = b.exe
	if err := ctx.Err(); err != nil {
		return err
	}
	// The build's id slot is held by its processes (they inherit slotLock) for as long as
	// the build runs, its unshift step included.
	var slotLock *os.File
	if b.ids != nil {
		slot, f, err := b.ids.claimTransient()
		if err != nil {
			return err
		}
		plan.ids, slotLock = &slot, f
		defer slotLock.Close()
	}

	stage, err := os.MkdirTemp(b.tmpDir(), req.ID+"-")
	if err != nil {
		return err
	}
	published := false
	defer func() {
		if !published {
			_ = removeAll(stage)
		}
	}()
	spec := req.Spec
	m := meta{ID: req.ID, Kind: kindSnapshot, Base: req.Base, Spec: &spec, BlockNetwork: req.BlockNetwork, Created: time.Now().UTC()}
	if err := b.stageBuild(stage, plan, m); err != nil {
		return err
	}
	cmd, err := startSupervisor(stage, plan, slotLock)
	if err != nil {
		return err
	}
	pidLine, err := supervisorPidLine(cmd.Process.Pid)
	if err == nil {
		err = writeFileAtomic(filepath.Join(stage, "pid"), []byte(pidLine), 0o600)
	}
	if err == nil {
		// Publishing the directory also opens the supervisor's gate (it waits for pid).
		err = os.Rename(stage, b.snapDir(req.ID))
	}
	if err != nil {
		_ = killGroup(cmd.Process.Pid)
		if b.Exists(req.ID) {
			// A concurrent StartBuild of the same id won the race.
			done, rerr := b.reuseExisting(ctx, req)
			if done || rerr != nil {
				return rerr
			}
		}
		return fmt.Errorf("publish build: %w", err)
	}
	published = true
	return nil
}

// reuseExisting decides what to do with a snapshot that already exists under the id:
// done is true when it can stand for the requested build.
func (b *Builder) reuseExisting(ctx context.Context, req sandbox.BuildRequest) (done bool, err error) {
	m, err := b.readMeta(req.ID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if m.Kind != kindSnapshot || m.Base != req.Base {
		return false, fmt.Errorf("a %s %s already exists on base %q, not on %q; delete it first", m.Kind, req.ID, m.Base, req.Base)
	}
	st, err := b.BuildState(ctx, req.ID)
	if err != nil {
		return false, err
	}
	if st.Status != sandbox.StatusFailed {
		return true, nil
	}
	return false, b.DeleteSnapshot(ctx, req.ID)
}

// stageBuild fills the staging directory: metadata, scripts, layer, work and mount dirs.
func (b *Builder) stageBuild(stage string, plan buildPlan, m meta) error {
	for _, top := range TopDirs() {
		// The merged root of an overlay takes its attributes from the upper directory,
		// so each upper directory copies the mode of the layer below.
		info, err := os.Stat(filepath.Join(b.layerDir(plan.lowerIDs[0]), top))
		if err != nil {
			return fmt.Errorf("base layer: %w", err)
		}
		for _, d := range []string{"layer", "work", "mnt"} {
			if err := os.MkdirAll(filepath.Join(stage, d, top), 0o700); err != nil {
				return err
			}
		}
		if err := os.Chmod(filepath.Join(stage, "layer", top), info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid)); err != nil {
			return err
		}
		if plan.ids != nil {
			// Root of the merged directory is the slot's root during the build; the
			// unshift step gives it back to 0.
			if err := os.Lchown(filepath.Join(stage, "layer", top), int(plan.ids.UID), int(plan.ids.GID)); err != nil {
				return err
			}
		}
	}
	if err := writePlan(filepath.Join(stage, "setup.json"), plan.setupPlan()); err != nil {
		return err
	}
	if err := plan.stageEgress(stage); err != nil {
		return err
	}
	files := []struct {
		name string
		data string
		perm fs.FileMode
	}{
		{"script.sh", buildScriptOf(*m.Spec), 0o644}, // read by the sandbox's root
		{"build.sh", plan.buildScript(), 0o600},
		{"run.sh", plan.superviseScript(), 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(stage, f.name), []byte(f.data), f.perm); err != nil {
			return err
		}
	}
	return writeMeta(stage, m)
}

// startSupervisor starts the supervisor in a new session with stdin on /dev/null and its
// output in build.log. Its script is passed with -c so that it does not depend on the
// staging path, which is renamed under it.
func startSupervisor(stage string, plan buildPlan, slotLock *os.File) (*exec.Cmd, error) {
	log, err := os.OpenFile(filepath.Join(stage, "build.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command("/bin/sh", "-c", plan.superviseScript())
	cmd.Dir = "/"
	// The caller's environment (the provider's credentials, for one) has no business in
	// a build.
	cmd.Env = []string{"PATH=" + sandboxPath, "LC_ALL=C"}
	cmd.Stdout, cmd.Stderr = log, log
	if slotLock != nil {
		cmd.ExtraFiles = []*os.File{slotLock}
	}
	detach(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start build supervisor: %w", err)
	}
	// Reap it if it ends while we live, so that it does not linger as a zombie that
	// looks alive; once we exit, init inherits it.
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

// supervisorPidLine identifies a process by pid and start time, so that a reused pid is
// not mistaken for the build.
func supervisorPidLine(pid int) (string, error) {
	start, err := processStartTime(pid)
	if err != nil {
		return "", fmt.Errorf("inspect build supervisor %d: %w", pid, err)
	}
	return strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10) + "\n", nil
}

// findTool resolves a program from PATH, falling back to the usual system directories
// (a provider may run with a minimal PATH).
func findTool(name string) (string, error) {
	if p := sandbox.FindProgram(name); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%s not found in PATH or the system directories; local builds need bubblewrap and util-linux", name)
}
