//go:build linux

package local

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// recordOnlyRuntime is a runtime with sandbox id recorded as rec and nothing else: what
// Relabel, Get and List read and write, without bubblewrap.
func recordOnlyRuntime(t *testing.T, rec record) *Runtime {
	t.Helper()
	r := &Runtime{root: t.TempDir()}
	if err := os.MkdirAll(r.dir(rec.ID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir(rec.ID), "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(r.dir(rec.ID), rec); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRelabelRecord: Relabel replaces the recorded labels whole and keeps the rest of
// the record; labels Create would refuse are refused and change nothing; a missing
// sandbox is ErrNotFound. No bubblewrap needed.
func TestRelabelRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := record{SandboxInfo: sandbox.SandboxInfo{ID: "pooled", SnapshotID: "snap", Status: sandbox.SandboxStopped,
		BlockNetwork: true, Env: map[string]string{"A": "b"}, Labels: map[string]string{"trueforge.pool": "p", "team": "a"},
		Limits: sandbox.Limits{CPU: 1}, Created: time.Now().UTC().Truncate(time.Second)},
		IDs: &idRange{UID: 100000, GID: 100000}}
	r := recordOnlyRuntime(t, rec)

	session := map[string]string{"trueforge.session": "s1", "team": "b"}
	if err := r.Relabel(ctx, "pooled", session); err != nil {
		t.Fatal(err)
	}
	got, err := r.readRecord("pooled")
	if err != nil {
		t.Fatal(err)
	}
	want := rec
	want.Labels = session
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record after Relabel:\n%+v\nwant\n%+v", got, want)
	}
	if info, err := r.Get(ctx, "pooled"); err != nil || !maps.Equal(info.Labels, session) {
		t.Fatalf("Get: %+v %v", info, err)
	}
	if list, err := r.List(ctx); err != nil || len(list) != 1 || !maps.Equal(list[0].Labels, session) {
		t.Fatalf("List: %+v %v", list, err)
	}
	if _, err := os.Stat(filepath.Join(r.dir("pooled"), "state.json.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary record left behind: %v", err)
	}

	if err := r.Relabel(ctx, "pooled", map[string]string{"bad\nkey": "v"}); err == nil {
		t.Fatal("a label key with a newline was accepted")
	}
	if info, _ := r.Get(ctx, "pooled"); !maps.Equal(info.Labels, session) {
		t.Fatalf("a refused Relabel changed the labels to %v", info.Labels)
	}

	if err := r.Relabel(ctx, "pooled", nil); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Get(ctx, "pooled"); err != nil || info.Labels != nil {
		t.Fatalf("Get after Relabel(nil): %+v %v, want no labels", info, err)
	}

	if err := r.Relabel(ctx, "nosuch", session); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Relabel of a missing sandbox: %v, want ErrNotFound", err)
	}
	if err := r.Relabel(ctx, "../pooled", session); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Relabel of an invalid id: %v, want it refused", err)
	}
}

// TestRelabelWhileRead: Get and List, which take no lock, always read one whole label
// set while Relabel switches between two, and concurrent Relabels (serialized by the
// sandbox's lock) leave one of them.
func TestRelabelWhileRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sets := [2]map[string]string{{}, {}}
	for i := range 20 {
		k := "k" + strconv.Itoa(i)
		sets[0][k], sets[1][k] = "even", "odd"
	}
	r := recordOnlyRuntime(t, record{SandboxInfo: sandbox.SandboxInfo{ID: "sb", Status: sandbox.SandboxRunning, Labels: sets[0]}})
	whole := func(l map[string]string) bool { return maps.Equal(l, sets[0]) || maps.Equal(l, sets[1]) }

	stop := make(chan struct{})
	var readers sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				info, err := r.Get(ctx, "sb")
				if err == nil && !whole(info.Labels) {
					err = errors.New("Get read a mix of label sets")
				}
				if err == nil {
					var list []sandbox.SandboxInfo
					list, err = r.List(ctx)
					if err == nil && (len(list) != 1 || !whole(list[0].Labels)) {
						err = errors.New("List read a mix of label sets, or no sandbox")
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 100 {
				if err := r.Relabel(ctx, "sb", sets[(i+w)%2]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if info, err := r.Get(ctx, "sb"); err != nil || !whole(info.Labels) {
		t.Fatalf("Get at the end: %+v %v", info, err)
	}
}

// TestRelabelRunningSandbox: a real sandbox takes new labels and goes on running its
// commands (the record's other fields are intact).
func TestRelabelRunningSandbox(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Labels: map[string]string{"trueforge.pool": "p"},
		Env: map[string]string{"GREETING": "hi"}})
	labels := map[string]string{"trueforge.session": "s1"}
	if err := r.Relabel(context.Background(), "sb", labels); err != nil {
		t.Fatal(err)
	}
	info, err := r.Get(context.Background(), "sb")
	if err != nil || !maps.Equal(info.Labels, labels) || info.Status != sandbox.SandboxRunning {
		t.Fatalf("Get: %+v %v", info, err)
	}
	if out := mustSh(t, r, "sb", "echo $GREETING"); out != "hi" {
		t.Fatalf("exec after Relabel: %q", out)
	}
}
