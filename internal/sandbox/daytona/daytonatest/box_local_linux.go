//go:build linux

package daytonatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// localBox runs each emulated sandbox as a real local sandbox (bubblewrap over overlay
// snapshots of the host, internal/sandbox/local) on a release snapshot prepared on first
// use. File calls and a command's cwd are served in the sandbox's /workspace (other
// absolute paths get 400), which is where trueforge's Daytona sandboxes work too: every
// build makes /workspace (daytona withWorkspace). Who may write it is modelled apart
// (workspace.go), since the local sandbox has one user.
type localBox struct {
	b   *local.Builder
	rt  *local.Runtime
	rel string
}

// newLocalBox prepares the release snapshot under root. ok is false when bubblewrap or
// unshare is not installed (the caller falls back to hostBox).
func newLocalBox(root string) (bx box, ok bool, err error) {
	for _, tool := range []string{"bwrap", "unshare"} {
		if _, err := findExecutable(tool); err != nil {
			return nil, false, nil //nolint:nilerr // a missing tool means fall back, not fail
		}
	}
	b, err := local.NewBuilder(filepath.Join(root, "local-backend"))
	if err != nil {
		return nil, true, err
	}
	rel, err := b.PrepareRelease(context.Background())
	if err != nil {
		return nil, true, err
	}
	rt, err := local.NewRuntime(b, filepath.Join(root, "local-runtime"))
	if err != nil {
		return nil, true, err
	}
	return &localBox{b: b, rt: rt, rel: rel}, true, nil
}

// wsPath maps a Daytona path to the local runtime's /workspace form.
func wsPath(p string) (string, error) {
	if !path.IsAbs(p) {
		p = "/workspace/" + p
	}
	c := path.Clean(p)
	if c != "/workspace" && !strings.HasPrefix(c, "/workspace/") {
		return "", fmt.Errorf("%w: %q (the emulator's local sandboxes serve /workspace only)", errBadPath, p)
	}
	return c, nil
}

func (l *localBox) create(id string, blockNetwork bool) error {
	return l.rt.Create(context.Background(), sandbox.CreateRequest{ID: id, SnapshotID: l.rel, BlockNetwork: blockNetwork})
}

func (l *localBox) stop(id string) error   { return l.rt.Stop(context.Background(), id) }
func (l *localBox) start(id string) error  { return l.rt.Start(context.Background(), id) }
func (l *localBox) remove(id string) error { return l.rt.Delete(context.Background(), id) }

func (l *localBox) close() {
	ctx := context.Background()
	if infos, err := l.rt.List(ctx); err == nil {
		for _, in := range infos {
			_ = l.rt.Delete(ctx, in.ID)
		}
	}
	_ = l.b.DeleteSnapshot(ctx, l.rel)
}

func (l *localBox) exec(ctx context.Context, id, command, cwd string, env map[string]string, limit time.Duration) (execResult, error) {
	req := sandbox.ExecRequest{Shell: command, Env: env, Timeout: limit}
	if cwd != "" {
		c, err := wsPath(cwd)
		if err != nil {
			return execResult{}, err
		}
		req.Cwd = c
	}
	res, err := l.rt.Exec(ctx, id, req)
	if err != nil {
		return execResult{}, err
	}
	// Daytona's /process/execute combines the streams; the local runtime keeps them
	// apart, so stdout comes first here.
	out := string(res.Stdout) + string(res.Stderr)
	return execResult{code: res.ExitCode, out: out, timedOut: res.TimedOut}, nil
}

func (l *localBox) run(ctx context.Context, id string, p proc) (int, error) {
	// Interactive: stdin is a live pipe, and the retained copy is not needed (the
	// writers get everything), hence the smallest cap.
	res, err := l.rt.Exec(ctx, id, sandbox.ExecRequest{Shell: p.command, Env: p.env, Stdin: p.stdin,
		Stdout: p.stdout, Stderr: p.stderr, Interactive: true, OutputCap: 1})
	if ctx.Err() != nil {
		return -1, nil //nolint:nilerr // cancelled: -1, as a killed command exits
	}
	if err != nil {
		return 0, err
	}
	return res.ExitCode, nil
}

// write keeps an existing file's mode (the local runtime opens it with O_TRUNC, as
// os.Create does) and makes a new one newFileMode, whatever this process's umask is.
func (l *localBox) write(id, p string, r io.Reader) error {
	c, err := wsPath(p)
	if err != nil {
		return err
	}
	ctx := context.Background()
	_, statErr := l.rt.StatFile(ctx, id, c)
	if err := l.rt.WriteFile(ctx, id, c, r, newFileMode); err != nil {
		return err
	}
	if !errors.Is(statErr, sandbox.ErrNotFound) {
		return nil
	}
	fi, err := l.rt.StatFile(ctx, id, c)
	if err != nil || fi.Mode.Perm() == newFileMode {
		return err
	}
	return l.chmod(id, p, newFileMode) // this process's umask is not the daemon's 0022
}

// chmod runs chmod(1) in the sandbox: the local runtime has no call for it.
func (l *localBox) chmod(id, p string, mode fs.FileMode) error {
	c, err := wsPath(p)
	if err != nil {
		return err
	}
	res, err := l.rt.Exec(context.Background(), id, sandbox.ExecRequest{
		Argv: []string{"chmod", strconv.FormatUint(uint64(mode.Perm()), 8), "--", c}, Timeout: time.Minute})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("chmod %s: %s", p, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

func (l *localBox) read(id, p string) ([]byte, error) {
	c, err := wsPath(p)
	if err != nil {
		return nil, err
	}
	return l.rt.ReadFile(context.Background(), id, c, 0)
}

func localInfo(fi sandbox.FileInfo) fileInfo {
	name := path.Base(fi.Path)
	if fi.Path == "." || fi.Path == "" {
		name = "workspace"
	}
	return fileInfo{Name: name, Size: fi.Size, Mode: fi.Mode.String(),
		Permissions: fmt.Sprintf("%#o", fi.Mode.Perm()), Owner: "daytona", Group: "daytona",
		IsDir: fi.Mode.IsDir(), ModifiedAt: fi.ModTime.UTC().Format(time.RFC3339Nano)}
}

func (l *localBox) stat(id, p string) (fileInfo, error) {
	c, err := wsPath(p)
	if err != nil {
		return fileInfo{}, err
	}
	fi, err := l.rt.StatFile(context.Background(), id, c)
	if err != nil {
		return fileInfo{}, err
	}
	return localInfo(fi), nil
}

func (l *localBox) list(id, p string) ([]fileInfo, error) {
	c, err := wsPath(p)
	if err != nil {
		return nil, err
	}
	// Daytona's toolbox lists a whole directory in one answer, as hostBox does: the
	// local runtime is asked for as many entries as it ever reads.
	fis, err := l.rt.ListFiles(context.Background(), id, c, sandbox.MaxListScan)
	if err != nil {
		return nil, err
	}
	out := make([]fileInfo, 0, len(fis.Entries))
	for _, fi := range fis.Entries {
		out = append(out, localInfo(fi))
	}
	return out, nil
}

func (l *localBox) del(id, p string, _ bool) error {
	c, err := wsPath(p)
	if err != nil {
		return err
	}
	if _, err := l.rt.StatFile(context.Background(), id, c); err != nil {
		return err
	}
	return l.rt.DeleteFile(context.Background(), id, c)
}
