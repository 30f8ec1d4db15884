package agents_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// answer is what agent name, loaded through specs, answers first.
func answer(t *testing.T, specs *agents.Specs, st *store.Store, name string) (string, error) {
	t.Helper()
	a, err := specs.Load(context.Background(), st, name)
	if err != nil {
		return "", err
	}
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		return "", err
	}
	resp, err := m.Generate(context.Background(), model.Request{}, nil)
	return resp.Text, err
}

// setAnswer stores agent name's spec, a replay answering text, and its max_turns.
func setAnswer(t *testing.T, st *store.Store, name, text string, maxTurns int64) {
	t.Helper()
	s := agentspec.Default(name)
	s.Model.Provider = agentspec.ModelScripted
	script := fmt.Sprintf(`{"turns": [{"text": %q}]}`, text)
	s.Model.Script = &script
	s.MaxTurns = maxTurns
	err := st.UpdateAgent(context.Background(), store.Agent{Name: name, Spec: s.Encode()})
	if errors.Is(err, store.ErrNotFound) {
		err = st.CreateAgent(context.Background(), store.Agent{ID: "agent-" + name, Name: name, Owner: harnesstest.Owner, Spec: s.Encode()})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A changed row is run as changed from the next load on, a deleted one is not found, and
// a spec that becomes invalid stops the agent: Specs keeps decodings, never the row.
func TestSpecsPickUpAChangedRowAtOnce(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	var specs agents.Specs
	setAnswer(t, st, "a", "one", 5)
	for i := 0; i < 2; i++ {
		if got, err := answer(t, &specs, st, "a"); err != nil || got != "one" {
			t.Fatalf("load %d: %q, %v; want one", i, got, err)
		}
	}
	setAnswer(t, st, "a", "two", 7)
	if got, err := answer(t, &specs, st, "a"); err != nil || got != "two" {
		t.Fatalf("after the row changed: %q, %v; want two", got, err)
	}
	a, err := specs.Load(ctx, st, "a")
	if err != nil || a.MaxTurns() != 7 {
		t.Fatalf("max turns after the change: %v, %v; want 7", a, err)
	}
	s := agentspec.Default("a")
	s.MaxTurns = agentspec.MaxMaxTurns + 1 // past the provider's bounds, written past terraform
	if err := st.UpdateAgent(ctx, store.Agent{Name: "a", Spec: s.Encode()}); err != nil {
		t.Fatal(err)
	}
	if _, err := specs.Load(ctx, st, "a"); !errors.Is(err, agents.ErrNotReady) {
		t.Fatalf("a spec past the bounds: %v, want ErrNotReady", err)
	}
	if err := st.DeleteAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := specs.Load(ctx, st, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted agent: %v, want ErrNotFound", err)
	}
}

// Loads share Specs across goroutines while the row changes (run with -race): every
// answer is one the row held, and once the writes are over, the last one.
func TestSpecsConcurrentLoads(t *testing.T) {
	st := harnesstest.NewStore(t)
	var specs agents.Specs
	setAnswer(t, st, "a", "v0", 5)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				a, err := specs.Load(context.Background(), st, "a")
				if err != nil {
					errs <- err
					return
				}
				if _, err := a.NewModel(agents.ModelOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 1; i <= 10; i++ {
		setAnswer(t, st, "a", fmt.Sprintf("v%d", i), 5)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, err := answer(t, &specs, st, "a"); err != nil || got != "v10" {
		t.Errorf("after the writes: %q, %v; want v10", got, err)
	}
}
