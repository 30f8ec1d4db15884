package harnesstest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// FileContains finds needles in the data extents of a sparse file, also across the
// boundary of its read chunks, and reports absent ones as absent.
func TestFileContainsSearchesSparseData(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // 2 GB, sparse
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head-marker"), 0); err != nil {
		t.Fatal(err)
	}
	// Far past a hole, a 2 MiB extent with the needle straddling its first 1 MiB read.
	filler := make([]byte, 2<<20)
	for i := range filler {
		filler[i] = 'x'
	}
	if _, err := f.WriteAt(filler, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("SPAN-NEEDLE-12345"), (1<<30)+(1<<20)-6); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := harnesstest.FileContains(p, []byte("head-marker"), []byte("SPAN-NEEDLE-12345"), []byte("absent-needle"))
	if err != nil {
		t.Fatal(err)
	}
	if !got[0] || !got[1] || got[2] {
		t.Fatalf("found %v; want true, true, false", got)
	}
}

// AddAgent stores what the provider stores for the same settings: agentspec's JSON with
// the defaults for what the test leaves out, and no environment reference while the
// sandbox is off.
func TestAddAgentStoresTheProvidersSpec(t *testing.T) {
	st := harnesstest.NewStore(t)
	harnesstest.AddAgent(t, st, "qa", "default", harnesstest.AgentSpec{"model": map[string]any{"provider": "scripted", "script": "[]"}})
	row, err := st.GetAgent(context.Background(), "qa")
	if err != nil {
		t.Fatal(err)
	}
	want := agentspec.Default("qa")
	script := "[]"
	want.Model = agentspec.Model{Provider: agentspec.ModelScripted, Script: &script}
	if row.Environment != "" || string(row.Spec) != string(want.Encode()) {
		t.Fatalf("stored environment %q, spec %s; want none and %s", row.Environment, row.Spec, want.Encode())
	}
}

// A key the spec does not have fails the test that wrote it, rather than being dropped.
func TestAddAgentRefusesUnknownFields(t *testing.T) {
	st := harnesstest.NewStore(t)
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		harnesstest.AddAgent(ft, st, "typo", "", harnesstest.AgentSpec{"modle": harnesstest.Script()}) //nolint:misspell // the misspelt key is the test
	}()
	<-done
	if !strings.Contains(ft.msg, `unknown field "modle"`) { //nolint:misspell // the misspelt key is the test
		t.Fatalf("AddAgent with a misspelt key: %q; want it refused", ft.msg)
	}
	if _, err := st.GetAgent(context.Background(), "typo"); err == nil {
		t.Fatal("the agent was stored")
	}
}

// fatalTB records a Fatal and ends the goroutine that called it, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
