package harnesstest

import (
	"context"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Runners is a runner factory for an API server's Config.Runner: each agent's runner
// as serve builds it without a credentials file (the agent loaded from st, its model
// from its spec), with tools whose sandboxes are those of sandboxes, or none when it is
// nil.
func Runners(st *store.Store, sandboxes *lifecycle.Manager) func(ctx context.Context, agent, user string) (*runner.Runner, error) {
	specs := &agents.Specs{}
	return func(ctx context.Context, agent, _ string) (*runner.Runner, error) {
		a, err := specs.Load(ctx, st, agent)
		if err != nil {
			return nil, err
		}
		m, err := a.NewModel(agents.ModelOptions{})
		if err != nil {
			return nil, err
		}
		return &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st, Sandboxes: sandboxes}}, nil
	}
}
