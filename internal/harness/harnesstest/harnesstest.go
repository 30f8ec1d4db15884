// Package harnesstest builds real fixtures for harness tests: a control-plane store with
// a local sandbox provider whose release snapshot is really prepared (so sandboxes are
// real bubblewrap sandboxes), an environment on it, agents, and a counting wrapper
// around the real runtime.
package harnesstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// Owner of every fixture row.
const Owner = "tester"

// Env is a store with a Ready local environment.
type Env struct {
	Store    *store.Store
	Snapshot string
	Runtime  *Counting // the real local runtime, counted
	Dir      string
}

// RequireSandboxTools skips when bubblewrap is missing (scripts/deps.sh installs it).
func RequireSandboxTools(tb testing.TB) {
	tb.Helper()
	for _, t := range []string{"bwrap", "unshare"} {
		if _, err := exec.LookPath(t); err != nil {
			tb.Skipf("skipping: %s is not installed (run scripts/deps.sh)", t)
		}
	}
}

// NewStore opens a fresh store with no provider.
func NewStore(tb testing.TB) *store.Store {
	tb.Helper()
	return storetest.Open(tb, filepath.Join(tb.TempDir(), "trueforge.db"))
}

// NewEnv returns a store with provider "local", its release snapshot prepared for real,
// and environment "default" on it. Every sandbox left is deleted at the end.
func NewEnv(tb testing.TB) *Env {
	tb.Helper()
	RequireSandboxTools(tb)
	st := NewStore(tb)
	ctx := context.Background()
	prov := store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: Owner}
	be, cfg := Backend(tb, st, prov)
	rel, rt := PrepareProvider(tb, st, prov, be, cfg)
	must(tb, st.CreateEnvironment(ctx, store.Environment{ID: "env-default", Name: "default", Provider: "local", Owner: Owner, Reserved: true,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "release", SnapshotID: rel,
		Env: map[string]string{"GREETING": "hello"}}))
	return &Env{Store: st, Snapshot: rel, Runtime: &Counting{Runtime: rt}, Dir: st.Dir()}
}

// PrepareProvider prepares the release snapshot of sandbox provider prov (whose backend
// and configuration are be and cfg) for real, stores the provider in st with it, and
// returns the snapshot and the provider's runtime, whose sandboxes are all deleted when
// the test ends.
func PrepareProvider(tb testing.TB, st *store.Store, prov store.SandboxProvider, be sandbox.Backend, cfg sandbox.ProviderConfig) (string, sandbox.Runtime) {
	tb.Helper()
	ctx := context.Background()
	b, err := be.Builder(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rel, err := b.PrepareRelease(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	prov.ReleaseSnapshot = rel
	must(tb, st.CreateSandboxProvider(ctx, prov))
	must(tb, st.RegisterReleaseSnapshot(ctx, prov.Name, rel))
	rt, err := be.Runtime(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		list, _ := rt.List(context.Background())
		for _, s := range list {
			if err := rt.Delete(context.Background(), s.ID); err != nil {
				tb.Errorf("cleanup: deleting sandbox %s: %v", s.ID, err)
			}
		}
	})
	return rel, rt
}

// SeedNoSandbox stores sandbox provider "local" and a default environment whose
// snapshot is not built: enough for agents without a sandbox.
func SeedNoSandbox(tb testing.TB, st *store.Store) {
	tb.Helper()
	ctx := context.Background()
	must(tb, st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: Owner}))
	_, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-x", Provider: "local", BuildHash: "h", Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed)
	must(tb, err)
	must(tb, st.CreateEnvironment(ctx, store.Environment{ID: "e", Name: "default", Provider: "local", Owner: Owner, Image: "platform",
		CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h", SnapshotID: "snap-x"}))
}

// Backend is the backend of sandbox provider prov and its configuration as the control
// plane in st makes it.
func Backend(tb testing.TB, st *store.Store, prov store.SandboxProvider) (sandbox.Backend, sandbox.ProviderConfig) {
	tb.Helper()
	be, err := backends.Default().Get(prov.Type)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := controlplane.New(st).Provider(context.Background(), prov)
	if err != nil {
		tb.Fatal(err)
	}
	return be, cfg
}

// AddEnvironment adds environment name on sandbox provider "local" (created, without a
// release snapshot, when missing), with its snapshot "snap-<name>" in status (Building,
// Ready or Failed). Nothing is built: for tests that read the control plane only.
func AddEnvironment(tb testing.TB, st *store.Store, name, status string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := st.GetSandboxProvider(ctx, "local"); errors.Is(err, store.ErrNotFound) {
		must(tb, st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: Owner}))
	}
	snap := "snap-" + name
	_, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: snap, Provider: "local", BuildHash: "h-" + name, Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed)
	must(tb, err)
	if status != sandbox.StatusBuilding {
		must(tb, st.SetSnapshotState(ctx, snap, status, "", ""))
	}
	must(tb, st.CreateEnvironment(ctx, store.Environment{ID: "env-" + name, Name: name, Provider: "local", Owner: Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h-" + name, SnapshotID: snap}))
}

// AgentSpec is what a test puts in an agent's spec: fields of agentspec.Spec by their
// JSON names, as a map so that a test names only what it sets.
type AgentSpec map[string]any

// AddAgent stores agent name as the provider does (StoreSpec): spec over the defaults
// the provider writes for what a configuration leaves out, failing the test on a field
// agentspec.Spec does not have. environment is the sandbox's environment when spec's
// "sandbox" names none; like the provider's, the row references it only when the
// sandbox is enabled.
func AddAgent(tb testing.TB, st *store.Store, name, environment string, spec AgentSpec) {
	tb.Helper()
	spec["name"] = name
	raw, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	s := agentspec.Default(name)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		tb.Fatalf("agent %q: spec %s is not an agentspec.Spec: %v", name, raw, err)
	}
	if sb, _ := spec["sandbox"].(map[string]any); sb["environment"] == nil && environment != "" {
		s.Sandbox.Environment = environment
	} else if environment != "" && s.Sandbox.Environment != environment {
		tb.Fatalf("agent %q: environment %q, but its sandbox names %q", name, environment, s.Sandbox.Environment)
	}
	StoreSpec(tb, st, s)
}

// StoreSpec stores an agent with spec s, owned by Owner, as the provider stores one: the
// spec encoded by agentspec, and the environment column set only for an enabled sandbox.
func StoreSpec(tb testing.TB, st *store.Store, s agentspec.Spec) {
	tb.Helper()
	must(tb, st.CreateAgent(context.Background(), store.Agent{ID: "agent-" + s.Name, Name: s.Name, Owner: Owner, Environment: s.EnvironmentRef(), Spec: s.Encode()}))
}

// Script returns a scripted model spec replaying turns.
func Script(turns ...map[string]any) map[string]any {
	b, _ := json.Marshal(map[string]any{"replay": "test", "turns": turns})
	return map[string]any{"provider": "scripted", "script": string(b)}
}

// Sandbox returns the settings of an enabled sandbox with the given timings (minutes).
func Sandbox(env string, idle, archive, del int64) map[string]any {
	return map[string]any{"enabled": true, "environment": env, "file_downloads": true,
		"idle_stop_minutes": idle, "archive_after_minutes": archive, "delete_after_minutes": del}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// Counting wraps a real Runtime and counts every call by method.
type Counting struct {
	sandbox.Runtime
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
}

func (c *Counting) count(m string) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[m]++
	c.mu.Unlock()
	c.total.Add(1)
}

// Calls returns how many times method was called.
func (c *Counting) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Total is the number of backend calls of any kind.
func (c *Counting) Total() int64 { return c.total.Load() }

func (c *Counting) Create(ctx context.Context, req sandbox.CreateRequest) error {
	c.count("Create")
	return c.Runtime.Create(ctx, req)
}
func (c *Counting) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	c.count("Exec")
	return c.Runtime.Exec(ctx, id, req)
}
func (c *Counting) Stop(ctx context.Context, id string) error {
	c.count("Stop")
	return c.Runtime.Stop(ctx, id)
}
func (c *Counting) Start(ctx context.Context, id string) error {
	c.count("Start")
	return c.Runtime.Start(ctx, id)
}
func (c *Counting) Archive(ctx context.Context, id string) error {
	c.count("Archive")
	return c.Runtime.Archive(ctx, id)
}
func (c *Counting) Delete(ctx context.Context, id string) error {
	c.count("Delete")
	return c.Runtime.Delete(ctx, id)
}
func (c *Counting) Get(ctx context.Context, id string) (sandbox.SandboxInfo, error) {
	c.count("Get")
	return c.Runtime.Get(ctx, id)
}
func (c *Counting) List(ctx context.Context) ([]sandbox.SandboxInfo, error) {
	c.count("List")
	return c.Runtime.List(ctx)
}
func (c *Counting) WriteFile(ctx context.Context, id, p string, r io.Reader, mode fs.FileMode) error {
	c.count("WriteFile")
	return c.Runtime.WriteFile(ctx, id, p, r, mode)
}
func (c *Counting) ReadFile(ctx context.Context, id, p string, maxBytes int64) ([]byte, error) {
	c.count("ReadFile")
	return c.Runtime.ReadFile(ctx, id, p, maxBytes)
}
func (c *Counting) StatFile(ctx context.Context, id, p string) (sandbox.FileInfo, error) {
	c.count("StatFile")
	return c.Runtime.StatFile(ctx, id, p)
}
func (c *Counting) ListFiles(ctx context.Context, id, dir string, limit int) (sandbox.FileList, error) {
	c.count("ListFiles")
	return c.Runtime.ListFiles(ctx, id, dir, limit)
}
func (c *Counting) DeleteFile(ctx context.Context, id, p string) error {
	c.count("DeleteFile")
	return c.Runtime.DeleteFile(ctx, id, p)
}

// UnenforcedLimits passes sandbox.LimitReporter through to the wrapped runtime.
func (c *Counting) UnenforcedLimits(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	if r, ok := c.Runtime.(sandbox.LimitReporter); ok {
		return r.UnenforcedLimits(lim)
	}
	return nil
}

// UnenforcedVolumes passes sandbox.VolumeLimitReporter through to the wrapped runtime.
func (c *Counting) UnenforcedVolumes(mounts []sandbox.VolumeMount) []sandbox.UnenforcedLimit {
	if r, ok := c.Runtime.(sandbox.VolumeLimitReporter); ok {
		return r.UnenforcedVolumes(mounts)
	}
	return nil
}

// Relabel passes sandbox.Relabeler through to the wrapped runtime (every local runtime
// is one).
func (c *Counting) Relabel(ctx context.Context, id string, labels map[string]string) error {
	c.count("Relabel")
	r, ok := c.Runtime.(sandbox.Relabeler)
	if !ok {
		return errors.ErrUnsupported
	}
	return r.Relabel(ctx, id, labels)
}

// Source adapts Counting to lifecycle.RuntimeSource.
type Source struct{ C *Counting }

// Runtime returns the counted runtime for any provider.
func (s Source) Runtime(ctx context.Context, p store.SandboxProvider) (sandbox.Runtime, error) {
	return s.C, nil
}

// Info describes the counted runtime's backend: the real one of the type.
func (s Source) Info(providerType string) (sandbox.Info, error) {
	b, err := backends.Default().Get(providerType)
	if err != nil {
		return sandbox.Info{}, err
	}
	return b.Info(), nil
}

// Secrets: the local backend keeps none.
func (s Source) Secrets(context.Context, store.SandboxProvider) (sandbox.SecretStore, error) {
	return nil, nil
}

// BuildStaticHarness builds trueforge-harness with CGO_ENABLED=0 into dir and returns
// its path: a static binary that serves as the netd helper of local sandboxes (tests
// point sandboxnet.HelperEnv or sandboxnet.Config.Helper at it). For TestMain.
func BuildStaticHarness(dir string) (string, error) {
	out := filepath.Join(dir, "trueforge-harness")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/trueforge/terraform-provider-trueforge/cmd/trueforge-harness")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building a static trueforge-harness: %v\n%s", err, b)
	}
	return out, nil
}

// Seek whences for the data and holes of a sparse file (Linux lseek(2)).
const (
	seekData = 3
	seekHole = 4
)

// FileContains reports which of needles occur in the file at path, reading only its
// data extents (SEEK_DATA/SEEK_HOLE), so a sandbox's sparse multi-gigabyte disk image
// is searched in the time its written blocks take. Extents are read in order with an
// overlap, so a needle that spans two consecutive extents is found too.
func FileContains(path string, needles ...[]byte) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := make([]bool, len(needles))
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	var tail []byte
	buf := make([]byte, 1<<20)
	fd := int(f.Fd())
	for off := int64(0); ; {
		start, err := syscall.Seek(fd, off, seekData)
		if err != nil {
			break // ENXIO: no data past off
		}
		end, err := syscall.Seek(fd, start, seekHole)
		if err != nil {
			return nil, err
		}
		for pos := start; pos < end; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
			if n == 0 && err != nil {
				return nil, err
			}
			chunk := append(tail, buf[:n]...)
			for i, nd := range needles {
				if !found[i] && bytes.Contains(chunk, nd) {
					found[i] = true
				}
			}
			if k := longest - 1; k > 0 && len(chunk) > k {
				tail = append([]byte(nil), chunk[len(chunk)-k:]...)
			} else {
				tail = append([]byte(nil), chunk...)
			}
			pos += int64(n)
		}
		off = end
	}
	return found, nil
}
