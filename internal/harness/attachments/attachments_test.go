package attachments_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// In a directory: content is kept once per digest, read back, and removed with the last
// attachment that refers to it; the caps refuse without keeping anything.
func TestServiceDirectory(t *testing.T) {
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	ctx := context.Background()
	harnesstest.AddAgent(t, st, "a", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "ok"})})
	if err := st.CreateSession(ctx, store.Session{ID: "s1", Agent: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svc := &attachments.Service{Store: st, Dir: dir, MaxBytes: 64, MaxPerSession: 3}
	put := func(name, body string) (store.Attachment, error) {
		return svc.Put(ctx, "s1", attachments.Upload{Name: name, Uploader: "alice"}, strings.NewReader(body))
	}
	a, err := put("a.txt", "same bytes")
	if err != nil {
		t.Fatal(err)
	}
	b, err := put("a.txt", "same bytes")
	if err != nil || b.Name != "a-2.txt" || b.SHA256 != a.SHA256 || !b.InDirectory {
		t.Fatalf("second: %+v %v", b, err)
	}
	blob := filepath.Join(dir, a.SHA256[:2], a.SHA256)
	r, err := svc.Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "same bytes" {
		t.Fatalf("read back %q", got)
	}
	if _, err := put("big.bin", strings.Repeat("x", 65)); !errors.Is(err, attachments.ErrTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := put("c.txt", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := put("d.txt", "d"); !errors.Is(err, attachments.ErrTooMany) {
		t.Fatalf("past the count: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "tmp", "*")); len(left) != 0 {
		t.Fatalf("refused uploads left %v", left)
	}
	if err := svc.Delete(ctx, "s1", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blob); err != nil {
		t.Fatalf("content another attachment refers to was removed: %v", err)
	}
	if err := svc.Delete(ctx, "s1", b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blob); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("content of no attachment kept: %v", err)
	}
	if err := svc.Delete(ctx, "s1", b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting again: %v", err)
	}
}
