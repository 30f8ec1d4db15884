package builds

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// remote is a backend that every process reaches, as Daytona is: one build state per
// snapshot id. StartBuild waits for release and then fails with startErr, if set.
type remote struct {
	mu       sync.Mutex
	states   map[string]sandbox.BuildState
	entered  chan struct{} // closed when StartBuild is called
	release  chan struct{}
	startErr error
}

func newRemote() *remote {
	return &remote{states: map[string]sandbox.BuildState{}, entered: make(chan struct{}), release: make(chan struct{})}
}

func (r *remote) PrepareRelease(context.Context) (string, error) { return "snap-release", nil }

func (r *remote) StartBuild(ctx context.Context, req sandbox.BuildRequest) error {
	close(r.entered)
	<-r.release
	if r.startErr != nil {
		return r.startErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states[req.ID] = sandbox.BuildState{Status: sandbox.StatusBuilding}
	return nil
}

func (r *remote) BuildState(_ context.Context, id string) (sandbox.BuildState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.states[id]
	if !ok {
		return st, sandbox.ErrNotFound
	}
	return st, nil
}

func (r *remote) DeleteSnapshot(context.Context, string) error { return nil }

// Two applies plan the same build inputs. B claims the snapshot and starts the build; A,
// a provider process whose config cache was loaded while the snapshot was Building,
// waits for it. B's build cannot start: B records the failure in the store, and the
// backend has no trace of it. A's wait must see B's record at once and return B's
// reason; a wait that read A's cached row would see Building until its deadline (and
// then blame a build that "never started").
func TestWaitSeesAnotherProcessFinishTheBuild(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		b, a := open(), open()
		addProvider(t, b, "local", "bob")
		spec := sandbox.SnapshotSpec{Image: "platform", BuildScript: "make", CPU: 1, MemoryGB: 1, DiskGB: 3}
		id := sandbox.SnapshotID(spec.BuildHash())
		backend := newRemote()
		backend.startErr = errors.New("quota exceeded")
		coordB := &Coordinator{Store: b, Builder: backend, Provider: "local"}
		ensured := make(chan error, 1)
		go func() {
			_, err := coordB.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: "snap-release"})
			ensured <- err
		}()
		<-backend.entered // claimed: the row says Building
		if err := b.CreateEnvironment(ctx, store.Environment{ID: "e1", Name: "py", Provider: "local", Owner: "bob", Image: "platform",
			CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: spec.BuildHash(), SnapshotID: id}); err != nil {
			t.Fatal(err)
		}

		a.EnableConfigCache()
		coordA := &Coordinator{Store: a, Builder: backend, Provider: "local", Poll: 10 * time.Millisecond}
		if snap, err := coordA.Refresh(ctx, id); err != nil || snap.Status != sandbox.StatusBuilding {
			t.Fatalf("A's refresh before the failure: %+v, %v", snap, err)
		}
		if a.ConfigLoads() != 1 {
			t.Fatalf("A's config cache did not load (%d loads): the test would not show a bypass", a.ConfigLoads())
		}

		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		type result struct {
			snap store.Snapshot
			err  error
		}
		waited := make(chan result, 1)
		queries := a.Queries()
		go func() {
			snap, err := coordA.Wait(waitCtx, id)
			waited <- result{snap, err}
		}()
		time.Sleep(50 * time.Millisecond) // A polls a few times while B is still starting
		close(backend.release)
		if err := <-ensured; err == nil || !strings.Contains(err.Error(), "quota exceeded") {
			t.Fatalf("B's Ensure: %v; want its start failure", err)
		}
		r := <-waited
		if r.err != nil {
			t.Fatalf("A's wait did not see B's recorded failure: %v", r.err)
		}
		if r.snap.Status != sandbox.StatusFailed || !strings.Contains(r.snap.Reason, "quota exceeded") {
			t.Fatalf("A's wait returned %+v; want Failed with B's reason", r.snap)
		}
		if n := a.Queries() - queries; n < 2 {
			t.Fatalf("A's wait made %d queries; each poll must read the database", n)
		}
		if a.ConfigLoads() != 1 {
			t.Fatalf("A's wait loaded the config cache (%d loads); it must read past it", a.ConfigLoads())
		}
	})
}
