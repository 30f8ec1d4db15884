package daytona_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

const labelsRoute = "PUT /sandbox/{id}/labels"

// TestRuntimeRelabel: Relabel replaces the labels a sandbox was created with (a warm pool
// member's) with a session's, and Get and List report the new ones, while the runtime's
// own (trueforge.id, trueforge.managed, the plane's) stay on the Daytona sandbox, so that
// List still finds it under its id. A stopped sandbox is relabelled too (Daytona refuses
// no state); a missing or deleted one is sandbox.ErrNotFound.
func TestRuntimeRelabel(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t, daytonatest.WithTransitionDelay("destroying", time.Hour))
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "pooled", SnapshotID: snap,
		Labels: map[string]string{"trueforge.pool": "p1", "team": "a"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "pooled") })

	session := map[string]string{"trueforge.session": "s1", "trueforge.agent": "ag", "team": "b"}
	if err := rt.Relabel(ctx, "pooled", session); err != nil {
		t.Fatal(err)
	}
	info, err := rt.Get(ctx, "pooled")
	if err != nil || !maps.Equal(info.Labels, session) {
		t.Fatalf("Get after Relabel: labels %v (%v), want %v", info.Labels, err, session)
	}
	list, err := rt.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "pooled" || !maps.Equal(list[0].Labels, session) {
		t.Fatalf("List after Relabel: %+v %v, want pooled with %v", list, err, session)
	}
	sb, err := c.GetSandbox(ctx, "pooled")
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(session)
	want[daytona.LabelID], want[daytona.LabelManaged], want["trueforge.plane"] = "pooled", "true", "test"
	if !maps.Equal(sb.Labels, want) {
		t.Fatalf("Daytona labels after Relabel: %v, want %v", sb.Labels, want)
	}

	// The runtime's own labels cannot be given; nothing is sent then.
	before := srv.Count(labelsRoute)
	if err := rt.Relabel(ctx, "pooled", map[string]string{daytona.LabelID: "other"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("Relabel with %s: %v, want refused as reserved", daytona.LabelID, err)
	}
	if n := srv.Count(labelsRoute); n != before {
		t.Fatalf("a refused Relabel sent %d requests", n-before)
	}

	// No labels: only the runtime's own remain. A stopped sandbox takes them.
	if err := rt.Stop(ctx, "pooled"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Relabel(ctx, "pooled", nil); err != nil {
		t.Fatalf("Relabel of a stopped sandbox: %v", err)
	}
	if info, err := rt.Get(ctx, "pooled"); err != nil || info.Labels != nil || info.Status != sandbox.SandboxStopped {
		t.Fatalf("Get after Relabel(nil): %+v %v, want stopped without labels", info, err)
	}
	if list, err := rt.List(ctx); err != nil || len(list) != 1 || list[0].ID != "pooled" {
		t.Fatalf("List after Relabel(nil): %+v %v, want pooled still listed", list, err)
	}

	if err := rt.Relabel(ctx, "nosuch", session); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Relabel of a missing sandbox: %v, want ErrNotFound", err)
	}
	// A deleted sandbox is renamed at once, though Daytona destroys it later: by its id
	// (the name it had) it is gone.
	if err := rt.Delete(ctx, "pooled"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Relabel(ctx, "pooled", session); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Relabel of a deleted sandbox: %v, want ErrNotFound", err)
	}
}

// TestRelabelRetriesAModifiedConflict: Daytona's optimistic update answers 409 "Sandbox
// was modified by another operation" when the sandbox changed between its read and its
// write; the replace had no effect, and the client sends it again.
func TestRelabelRetriesAModifiedConflict(t *testing.T) {
	t.Parallel()
	srv, _, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "busy", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "busy") })
	srv.InjectFaultsMessage(labelsRoute, 2, http.StatusConflict, "Sandbox was modified by another operation")
	if err := rt.Relabel(ctx, "busy", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count(labelsRoute); n != 3 {
		t.Fatalf("%d PUTs, want 2 conflicts and the replace", n)
	}
	if info, err := rt.Get(ctx, "busy"); err != nil || info.Labels["k"] != "v" {
		t.Fatalf("Get: %+v %v", info, err)
	}

	// Another 409 (a name taken, say) is not retried.
	srv.InjectFaultsMessage(labelsRoute, 1, http.StatusConflict, "something else")
	if err := rt.Relabel(ctx, "busy", nil); !daytona.IsConflict(err) {
		t.Fatalf("Relabel: %v, want the 409", err)
	}
	if n := srv.Count(labelsRoute); n != 4 {
		t.Fatalf("%d PUTs, want the other 409 not retried", n)
	}
}

// TestEmulatorReplaceLabels pins the emulator's PUT /sandbox/{id}/labels against v0.190
// (daytonatest/labels.go cites it): write:sandboxes, 404 for an unknown sandbox, the
// whole Sandbox as the answer, replace (not merge) semantics, by id or by name; and the
// emulator's own refusal of a body Daytona would store as it is.
func TestEmulatorReplaceLabels(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	snap := readySnapshot(t, ctx, c, "echo labels")
	sb, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "lab", Snapshot: snap, Labels: map[string]string{"a": "1", "b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(testCtx(t), sb.ID) })

	status, body := rawJSON(t, http.MethodPut, srv.URL()+"/sandbox/lab/labels", `{"labels":{"c":"3"}}`)
	var got daytona.Sandbox
	if status != 200 || json.Unmarshal([]byte(body), &got) != nil || got.ID != sb.ID || got.Name != "lab" || got.Snapshot != snap ||
		!maps.Equal(got.Labels, map[string]string{"c": "3"}) {
		t.Fatalf("PUT labels by name: %d %s; want 200 with the whole sandbox, labels replaced", status, body)
	}
	if l, err := c.ReplaceSandboxLabels(ctx, sb.ID, map[string]string{"d": "4"}); err != nil || !maps.Equal(l, map[string]string{"d": "4"}) {
		t.Fatalf("ReplaceSandboxLabels by id: %v %v", l, err)
	}

	for _, b := range []string{`{}`, `{"labels":null}`, `{"labels":"x"}`, `{"labels":{"n":1}}`, `{"labels":{},"extra":1}`} {
		if status, body := rawJSON(t, http.MethodPut, srv.URL()+"/sandbox/lab/labels", b); status != 400 {
			t.Errorf("PUT labels %s: %d %s, want the emulator's 400", b, status, body)
		}
	}
	if got, err := c.GetSandbox(ctx, "lab"); err != nil || !maps.Equal(got.Labels, map[string]string{"d": "4"}) {
		t.Fatalf("labels after refused PUTs: %v %v, want them unchanged", got, err)
	}

	_, err = c.ReplaceSandboxLabels(ctx, "nosuch", nil)
	var e *daytona.APIError
	if !errors.As(err, &e) || e.Status != 404 || e.Message != "Sandbox with ID or name nosuch not found" || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("unknown sandbox: %v, want 404", err)
	}

	srv.AddKey("nowrite", "delete:sandboxes")
	_, err = newClient(t, srv, "nowrite").ReplaceSandboxLabels(ctx, "lab", nil)
	if ok, p := daytona.IsForbidden(err); !ok || p != "write:sandboxes" {
		t.Fatalf("without write:sandboxes: %v, want 403 naming it", err)
	}
}
