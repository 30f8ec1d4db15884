package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// fakeRuntime is a sandbox.Runtime that keeps boxes as statuses, so the machine's tests
// can put a box in any state the backend could report and make any call fail. The
// conformance suite (sandboxtest) holds the real runtimes to what the machine assumes
// of them; the runner's tests drive the machine on a real one end to end.
type fakeRuntime struct {
	mu    sync.Mutex
	boxes map[string]*sandbox.SandboxInfo
	// fail makes the named method ("Create", "Start", ...) return the error.
	fail map[string]error
	// unhealthy makes Exec exit 1.
	unhealthy bool
	// reportDown makes Get report every box stopped, whatever it is (a backend whose
	// status lags behind a start).
	reportDown bool
	// after: a method named in fail succeeds this many times before it fails.
	after map[string]int
	// onExec runs at the start of every Exec.
	onExec func()
	calls  []string
	counts map[string]int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{boxes: map[string]*sandbox.SandboxInfo{}, fail: map[string]error{}, after: map[string]int{}, counts: map[string]int{}}
}

func (f *fakeRuntime) call(name, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+id)
	f.counts[name]++
	if f.counts[name] <= f.after[name] {
		return nil
	}
	return f.fail[name]
}

// failAfter makes method name fail with err once it has succeeded n times.
func (f *fakeRuntime) failAfter(name string, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[name], f.after[name] = err, n
}

// put makes the backend hold box id in status.
func (f *fakeRuntime) put(id, status, snapshot string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boxes[id] = &sandbox.SandboxInfo{ID: id, Status: status, SnapshotID: snapshot}
}

func (f *fakeRuntime) status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		return b.Status
	}
	return "gone"
}

func (f *fakeRuntime) Create(_ context.Context, req sandbox.CreateRequest) error {
	if err := f.call("Create", req.ID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.boxes[req.ID]; ok {
		return fmt.Errorf("sandbox %s: %w", req.ID, sandbox.ErrExists)
	}
	f.boxes[req.ID] = &sandbox.SandboxInfo{ID: req.ID, Status: sandbox.SandboxRunning, SnapshotID: req.SnapshotID, Labels: req.Labels}
	return nil
}

func (f *fakeRuntime) Exec(_ context.Context, id string, _ sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if f.onExec != nil {
		f.onExec()
	}
	if err := f.call("Exec", id); err != nil {
		return sandbox.ExecResult{ExitCode: -1}, err
	}
	if f.status(id) != sandbox.SandboxRunning {
		return sandbox.ExecResult{ExitCode: -1}, sandbox.ErrStopped
	}
	if f.unhealthy {
		return sandbox.ExecResult{ExitCode: 1}, nil
	}
	return sandbox.ExecResult{}, nil
}

// move sets a box's status, or fails with the method's error or ErrNotFound.
func (f *fakeRuntime) move(name, id, status string) error {
	if err := f.call(name, id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	b.Status = status
	return nil
}

func (f *fakeRuntime) Stop(_ context.Context, id string) error {
	return f.move("Stop", id, sandbox.SandboxStopped)
}

func (f *fakeRuntime) Start(_ context.Context, id string) error {
	return f.move("Start", id, sandbox.SandboxRunning)
}

func (f *fakeRuntime) Archive(_ context.Context, id string) error {
	return f.move("Archive", id, sandbox.SandboxArchived)
}

func (f *fakeRuntime) Delete(_ context.Context, id string) error {
	if err := f.call("Delete", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.boxes, id)
	return nil
}

func (f *fakeRuntime) Get(_ context.Context, id string) (sandbox.SandboxInfo, error) {
	if err := f.call("Get", id); err != nil {
		return sandbox.SandboxInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return sandbox.SandboxInfo{}, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	info := *b
	if f.reportDown {
		info.Status = sandbox.SandboxStopped
	}
	return info, nil
}

// Relabel replaces a box's labels, as the backends' Relabelers do.
func (f *fakeRuntime) Relabel(_ context.Context, id string, labels map[string]string) error {
	if err := f.call("Relabel", id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	b.Labels = maps.Clone(labels)
	return nil
}

func (f *fakeRuntime) List(context.Context) ([]sandbox.SandboxInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sandbox.SandboxInfo
	for _, b := range f.boxes {
		out = append(out, *b)
	}
	return out, nil
}

// The machine never touches files.
func (f *fakeRuntime) WriteFile(context.Context, string, string, io.Reader, fs.FileMode) error {
	return errors.ErrUnsupported
}

func (f *fakeRuntime) ReadFile(context.Context, string, string, int64) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

func (f *fakeRuntime) StatFile(context.Context, string, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, errors.ErrUnsupported
}

func (f *fakeRuntime) ListFiles(context.Context, string, string, int) (sandbox.FileList, error) {
	return sandbox.FileList{}, errors.ErrUnsupported
}
func (f *fakeRuntime) DeleteFile(context.Context, string, string) error { return errors.ErrUnsupported }

// fakeSource serves the one fake runtime for every provider; its backend enforces the
// network itself, so no egress proxy is involved.
type fakeSource struct{ rt *fakeRuntime }

func (s fakeSource) Runtime(context.Context, store.SandboxProvider) (sandbox.Runtime, error) {
	return s.rt, nil
}

func (s fakeSource) Info(string) (sandbox.Info, error) {
	return sandbox.Info{Type: "fake", Capabilities: sandbox.Capabilities{NetworkByBackend: true}}, nil
}

func (s fakeSource) Secrets(context.Context, store.SandboxProvider) (sandbox.SecretStore, error) {
	return nil, nil
}

// machine is a Manager over a fresh SQLite store and a fake runtime, with one session
// (sessionID) of one agent, a clock the test moves, and the events it records.
type machine struct {
	m     *Manager
	st    *store.Store
	rt    *fakeRuntime
	agent *agents.Agent
	now   time.Time

	mu     sync.Mutex
	events []events.Payload
}

const (
	sessionID = "s-m1"
	snapshot  = "snap-1"
)

func newMachine(t *testing.T) *machine {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "trueforge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := store.SandboxProvider{Name: "fake", Type: "fake", Status: "ready", Owner: "team-a"}
	if err := st.CreateSandboxProvider(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, store.Session{ID: sessionID, Agent: "helper", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	x := &machine{st: st, rt: newFakeRuntime(), now: time.Unix(1_700_000_000, 0)}
	x.agent = &agents.Agent{Name: "helper", Owner: "team-a", Provider: p,
		Environment: store.Environment{Name: "env", Provider: "fake", Owner: "team-a", SnapshotID: snapshot, BlockAll: true}}
	x.agent.Spec.Sandbox.Enabled = true
	x.m = New(Config{Store: st, Runtimes: fakeSource{x.rt}, Now: func() time.Time { return x.now }, Owner: "this-harness",
		ChangeWait: time.Second,
		Record: func(_ context.Context, _ string, p events.Payload) {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.events = append(x.events, p)
		}})
	return x
}

// kinds returns the kinds recorded since the last call, and forgets them.
func (x *machine) kinds() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for _, p := range x.events {
		out = append(out, p.Kind())
	}
	x.events = nil
	return out
}

func (x *machine) record(t *testing.T) store.SessionSandbox {
	t.Helper()
	rec, err := x.st.GetSessionSandbox(t.Context(), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// acquire takes the session's sandbox and releases it at once.
func (x *machine) acquire(t *testing.T) (*Lease, error) {
	t.Helper()
	l, err := x.m.Acquire(t.Context(), sessionID, x.agent)
	if err == nil {
		l.Release(t.Context())
	}
	return l, err
}

// at puts the session's record in state (with the sandbox generation 1) and its box in
// status ("gone": none); uncertain are the paths a dead call was writing.
func (x *machine) at(t *testing.T, state, status string, uncertain ...string) {
	t.Helper()
	ctx := t.Context()
	id := sandboxID(sessionID, 1)
	rec := store.SessionSandbox{SessionID: sessionID, Provider: "fake", ProviderType: "fake", SandboxID: id, Environment: "env",
		SnapshotID: snapshot, State: state, Generation: 1, CreatedAt: x.now, LastUsedAt: x.now, StateAt: x.now}
	if err := x.st.PutSessionSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if len(uncertain) > 0 {
		if err := x.st.SetSandboxUncertain(ctx, sessionID, uncertain); err != nil {
			t.Fatal(err)
		}
	}
	if status != "gone" {
		x.rt.put(id, status, snapshot)
	}
}

// allowed reports whether kinds are a subsequence of what tr's row says it records.
func allowed(tr transition, kinds []string) bool {
	row := lifecycleTable[tr]
	i := 0
	for _, k := range kinds {
		j := slices.Index(row.events[i:], k)
		if j < 0 {
			return false
		}
		i += j + 1
	}
	return true
}
