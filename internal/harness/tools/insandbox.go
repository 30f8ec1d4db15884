package tools

import (
	"context"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
)

// InSandbox runs fn with the call's sandbox, as the built-in tools do: acquired (and
// provisioned, resumed or recovered) first, released after, and a call whose sandbox
// died on the way (fn's maybeLost) answered as a loss. fn returns the text the model
// sees, whether it is an error, and whether the sandbox may have been lost. For tools
// outside this package (Code Mode).
func (x *Executor) InSandbox(ctx context.Context, c Call, fn func(l *lifecycle.Lease, r *Result) (text string, isErr, maybeLost bool)) Result {
	return invocation{x: x, c: c}.withSandbox(ctx, nil, fn)
}
